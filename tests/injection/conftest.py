"""Injection tests: memories placed by hand (controlled content, importance and scope), the scripted embedder for
the triggered recall's search, and the extraction tests' story and model where a pipeline is needed."""

from __future__ import annotations

import pytest

from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.memories.services.memories import memory_create
from apps.memories.services.schema import chat_schema_ensure
from tests.chats.factories import CharacterFactory
from tests.extraction.conftest import add_turns, character, model, story  # noqa: F401 — shared fixtures
from tests.memories.conftest import embedder, scripted  # noqa: F401


@pytest.fixture
def remember(user):
    """memory_create with the test's user; `character`/`chat` give the scope."""

    def make(kind: str, content: str, **fields):
        fields.setdefault("origin", "extraction")
        return memory_create(user=user, kind=kind, content=content, **fields)

    return make


def say(chat, *turns: tuple[str, str]) -> None:
    """Messages `(name, text)`, a name of "Rowan" being the user."""
    start = chat.message_count
    Message.objects.bulk_create(
        Message(chat=chat, index=start + i, name=name, is_user=name == "Rowan", mes=text)
        for i, (name, text) in enumerate(turns)
    )
    chat.message_count = start + len(turns)
    chat.save(update_fields=["message_count"])


@pytest.fixture
def group(user):
    mira, tobin = CharacterFactory(user=user, name="Mira"), CharacterFactory(user=user, name="Tobin")
    chat = chat_create(user=user, title="Group", character_ids=[mira.pk, tobin.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    return chat, mira, tobin
