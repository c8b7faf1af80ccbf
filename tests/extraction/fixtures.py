"""Extraction fixtures shared with the injection and fault suites (registered in tests/conftest.py through
`pytest_plugins`): the scripted model answering the story script, the story chat, and the scripted model as a
real worker sees it."""

from __future__ import annotations

import pytest

from apps.chats.services.chats import chat_create
from apps.llm.services import connection_create
from apps.memories.services.schema import chat_schema_ensure
from apps.memories.services.settings import embedding_settings_set
from tests.extraction.helpers import script


@pytest.fixture
def model(user, llm_server, scripted):
    """The user's default connection (hosted, profile B) to the scripted model, answering the story script."""
    connection = connection_create(
        user=user,
        name="scripted",
        base_url=llm_server.url,
        model="scripted-model",
        profile="B",
        api_key="sk-x",
        is_default=True,
    )
    script(llm_server)
    connection.server = llm_server
    return connection


@pytest.fixture
def story(user, character):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    return chat


@pytest.fixture
def worker_model(user, llm_server, embedder):
    """The scripted model as the user's default (hosted) connection; vectors from the scripted embedder, as the
    user's own provider (the worker does not see this process's settings)."""
    embedding_settings_set(user=user, provider="openai", model="scripted", base_url=f"{embedder.url}/v1")
    script(llm_server)
    connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="m", profile="B", api_key="sk-x", is_default=True
    )
    return llm_server
