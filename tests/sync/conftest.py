import pytest

from apps.chats.services.chats import chat_import
from tests.chats.helpers import fixture_bytes, stream


@pytest.fixture
def chat(user):
    return chat_import(user=user, stream=stream(fixture_bytes("current_swipes.jsonl")), title="Seraphina")


def if_match(chat_or_integrity) -> dict:
    integrity = getattr(chat_or_integrity, "integrity", chat_or_integrity)
    return {"HTTP_IF_MATCH": f'"{integrity}"'}
