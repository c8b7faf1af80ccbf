import pytest

from apps.chats.services.chats import chat_import
from tests.chats.helpers import fixture_bytes, stream


@pytest.fixture
def chat(user):
    return chat_import(user=user, stream=stream(fixture_bytes("current_swipes.jsonl")), title="Seraphina")
