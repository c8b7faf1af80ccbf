"""Injection tests: memories placed by hand (controlled content, importance and scope), the scripted embedder for
the triggered recall's search (tests/injection/helpers.py), and the extraction tests' story and model
(tests/extraction/fixtures.py) where a pipeline is needed."""

from __future__ import annotations

import pytest

from apps.accounts.services import settings_document_get
from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.injection.services.context import context_build
from apps.injection.services.settings import injection_settings_save
from apps.memories.services.memories import memory_create
from apps.memories.services.schema import chat_schema_ensure
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import fresh
from tests.injection.helpers import ASK, DOG, say


@pytest.fixture
def remember(user):
    """memory_create with the test's user; `character`/`chat` give the scope."""

    def make(kind: str, content: str, **fields):
        fields.setdefault("origin", "extraction")
        return memory_create(user=user, kind=kind, content=content, **fields)

    return make


@pytest.fixture
def group(user):
    mira, tobin = CharacterFactory(user=user, name="Mira"), CharacterFactory(user=user, name="Tobin")
    chat = chat_create(user=user, title="Group", character_ids=[mira.pk, tobin.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    return chat, mira, tobin


@pytest.fixture
def facts(user, story, character, remember, scripted):
    """Long-term memories more than the long-term slot holds; the one the question (ASK, message 1) is about is
    minor, so only the turn's recall brings it."""
    injection_settings_save(
        user=user, values={"budgets": {"long": 60}}, integrity=settings_document_get(user=user).integrity
    )
    made = [
        remember("fact", f"{name} trades salt for copper in the harbour.", character=character, importance=3)
        for name in ("Corvin", "Tessa", "Hale", "Brin")
    ]
    dog = remember("fact", DOG, character=character, importance=1, entities=[{"name": "Biscuit", "type": "animal"}])
    say(story, ("Mira", "Welcome back."), ("Rowan", ASK))
    return {"dog": dog, "others": made}


@pytest.fixture
def recalled(user, story, facts) -> Chat:
    """The context built for ASK: message 1 holds its recall. Answers the chat as it now is."""
    context_build(user=user, chat=story, message=ASK)
    return fresh(story)
