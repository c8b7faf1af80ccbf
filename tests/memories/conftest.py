"""Memories tests: the scripted embedding server (tests/memories/embedding_server.py) through the `embedder` and
`scripted` fixtures of tests/memories/fixtures.py."""

from __future__ import annotations

import pytest

from apps.chats.services.chats import chat_import
from tests.memories.helpers import jsonl


@pytest.fixture
def indexed_chat(user, scripted, django_capture_on_commit_callbacks):
    """A small imported chat, indexed and embedded as the on-commit task would."""
    with django_capture_on_commit_callbacks(execute=True):
        return chat_import(
            user=user,
            stream=jsonl(
                ("Mira", "The lantern went out at midnight."),
                ("You", "Who relit it?"),
                ("Mira", "Old Corvin climbed the tower with a match."),
                ("You", "Brave man."),
            ),
            title="Lantern",
        )
