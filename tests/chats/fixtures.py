"""The character and the chat most tests start from, declared once (registered in tests/conftest.py through
`pytest_plugins`). A test that needs another chat names it by what differs (`group_chat`, `mira_chat`)."""

from __future__ import annotations

import pytest

from apps.chats.services.chats import chat_create, chat_import
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import fixture_bytes, stream


@pytest.fixture
def character(user):
    """Mira, whose card the extraction prompts carry."""
    return CharacterFactory(user=user, name="Mira", description="A harbour clerk with a sharp eye.")


@pytest.fixture
def chat(user):
    """A SillyTavern chat imported from its file: a header, and messages with swipes."""
    return chat_import(user=user, stream=stream(fixture_bytes("current_swipes.jsonl")), title="Seraphina")


@pytest.fixture
def group_chat(user):
    """A group chat imported from a headerless file (no metadata line), named "Tavern"."""
    return chat_import(
        user=user, stream=stream(fixture_bytes("group_headerless.jsonl")), filename="tavern.jsonl", title="Tavern"
    )


@pytest.fixture
def mira_chat(user, character):
    """A new, empty chat with `character`."""
    return chat_create(user=user, title="The lantern", character_ids=[character.pk])
