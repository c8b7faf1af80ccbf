"""Fixtures of the archive and backup tests (tests/archives, tests/security/test_archive_safety.py), shared through
`pytest_plugins` in tests/conftest.py."""

import io

import pytest

from apps.chats.services.chats import chat_import
from apps.memories.services.memories import memory_create
from tests.chats.helpers import fixture_bytes


@pytest.fixture
def media(settings, tmp_path):
    """Backups and uploads are written under a fresh MEDIA_ROOT."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


@pytest.fixture
def seraphina(user, scripted):
    """An account worth archiving: the Seraphina chat (with swipes) and a memory of its character."""
    chat = chat_import(user=user, stream=io.BytesIO(fixture_bytes("current_swipes.jsonl")), title="Seraphina")
    memory_create(user=user, kind="fact", content="Mira keeps a lantern.", character=chat.characters.first())
    return chat
