"""Injection tests: memories placed by hand (controlled content, importance and scope), the scripted embedder for
the triggered recall's search, and the extraction tests' story and model where a pipeline is needed."""

from __future__ import annotations

import pytest

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from apps.injection.services.context import context_build
from apps.injection.services.recall import recall_stored
from apps.injection.services.settings import injection_settings_save
from apps.memories.services.memories import memory_create
from apps.memories.services.schema import chat_schema_ensure
from apps.sync.services.settings import settings_get
from tests.chats.factories import CharacterFactory
from tests.extraction.conftest import add_turns, character, model, story  # noqa: F401 — shared fixtures
from tests.memories.conftest import embedder, scripted  # noqa: F401

ASK = "Tell me about the lighthouse keeper's old dog."
DOG = "The lighthouse keeper's old dog is called Biscuit."


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


@pytest.fixture
def facts(user, story, character, remember, scripted):  # noqa: F811 — the imported fixtures, requested
    """Long-term memories more than the long-term slot holds; the one the question (ASK, message 1) is about is
    minor, so only the turn's recall brings it."""
    injection_settings_save(user=user, values={"budgets": {"long": 60}}, integrity=settings_get(user=user).integrity)
    made = [
        remember("fact", f"{name} trades salt for copper in the harbour.", character=character, importance=3)
        for name in ("Corvin", "Tessa", "Hale", "Brin")
    ]
    dog = remember("fact", DOG, character=character, importance=1, entities=[{"name": "Biscuit", "type": "animal"}])
    say(story, ("Mira", "Welcome back."), ("Rowan", ASK))
    return {"dog": dog, "others": made}


@pytest.fixture
def recalled(user, story, facts) -> Chat:  # noqa: F811
    """The context built for ASK: message 1 holds its recall. Answers the chat as it now is."""
    context_build(user=user, chat=story, message=ASK)
    return fresh(story)


def fresh(chat) -> Chat:
    return Chat.objects.get(pk=chat.pk)


def stored(chat, index: int = 1):
    return recall_stored(Message.objects.get(chat=chat, index=index))
