"""A chat's delta: the messages since an index, paged."""

import pytest

from tests.chats.factories import ChatFactory, add_messages

pytestmark = pytest.mark.django_db


def test_delta_pages_through_a_chat(api, user):
    chat = ChatFactory(user=user, chat_metadata={"k": 1})
    add_messages(chat, 7)
    page = api.get(f"/api/v1/chats/{chat.pk}/delta?from_index=2&limit=3").json()
    assert [m["mes"] for m in page["messages"]] == ["message 2", "message 3", "message 4"]
    assert page["next_index"] == 5 and page["has_more"] and page["total_messages"] == 7
    assert page["chat_metadata"] == {"k": 1} and page["integrity"] == str(chat.integrity)
    last = api.get(f"/api/v1/chats/{chat.pk}/delta?from_index=5&limit=3").json()
    assert last["has_more"] is False and last["next_index"] is None
