"""Idempotency keys on writes: a retry answers the first answer, a key reused for another request is refused,
keys are per user, and a failed write is not remembered."""

import pytest

from apps.chats.models import Chat
from tests.chats.factories import ChatFactory
from tests.chats.helpers import exported, fixture_bytes, fresh, if_match, json_lines

pytestmark = pytest.mark.django_db


def test_a_retry_with_the_same_idempotency_key_answers_the_first_answer(api, chat):
    body = {"operations": [{"op": "add", "path": "/-", "value": {"name": "You", "is_user": True, "mes": "Once"}}]}
    headers = {**if_match(chat.integrity), "HTTP_IDEMPOTENCY_KEY": "key-1"}
    first = api.post(f"/api/v1/chats/{chat.pk}/patch", body, format="json", **headers)
    # The first answer was lost on the wire; the client sends the very same request again.
    again = api.post(f"/api/v1/chats/{chat.pk}/patch", body, format="json", **headers)
    assert again.status_code == 200 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and again["ETag"] == first["ETag"]
    assert fresh(chat).message_count == 4


def test_an_idempotency_key_reused_for_another_request_is_422(api, chat):
    headers = {**if_match(chat.integrity), "HTTP_IDEMPOTENCY_KEY": "key-2"}
    api.post(
        f"/api/v1/chats/{chat.pk}/patch",
        {"operations": [{"op": "test", "path": "/0/swipe_id", "value": 0}]},
        format="json",
        **headers,
    )
    response = api.post(
        f"/api/v1/chats/{chat.pk}/patch", {"operations": [{"op": "remove", "path": "/0"}]}, format="json", **headers
    )
    assert response.status_code == 422 and response.json()["error"] == "idempotency_key_reused"
    assert fresh(chat).message_count == 3


def test_idempotency_keys_are_per_user(api, other_api, chat, other_user):
    other_chat = ChatFactory(user=other_user)
    headers = {"HTTP_IDEMPOTENCY_KEY": "shared"}
    api.post(
        f"/api/v1/chats/{chat.pk}/append",
        {"messages": [{"mes": "a"}]},
        format="json",
        **headers,
        **if_match(chat.integrity),
    )
    response = other_api.post(
        f"/api/v1/chats/{other_chat.pk}/append",
        {"messages": [{"mes": "b"}]},
        format="json",
        **headers,
        **if_match(other_chat.integrity),
    )
    assert response.status_code == 200 and "Idempotent-Replayed" not in response


def test_a_failed_write_is_not_remembered(api, chat):
    headers = {"HTTP_IDEMPOTENCY_KEY": "key-3", **if_match("00000000-0000-4000-8000-000000000000")}
    body = {"messages": [{"mes": "x"}]}
    assert api.post(f"/api/v1/chats/{chat.pk}/append", body, format="json", **headers).status_code == 409
    headers.update(if_match(chat.integrity))
    assert api.post(f"/api/v1/chats/{chat.pk}/append", body, format="json", **headers).status_code == 200


def test_an_idempotency_key_reused_for_a_different_save_is_refused(api, chat):
    headers = {"HTTP_IDEMPOTENCY_KEY": "save-1", **if_match(chat)}
    first = [{"user_name": "a", "character_name": "b"}, {"mes": "one"}]
    assert api.post(f"/api/v1/chats/{chat.pk}/save", {"chat": first}, format="json", **headers).status_code == 200
    again = api.post(f"/api/v1/chats/{chat.pk}/save", {"chat": first}, format="json", **headers)
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    other = [{"user_name": "a", "character_name": "b"}, {"mes": "two"}]
    response = api.post(f"/api/v1/chats/{chat.pk}/save", {"chat": other}, format="json", **headers)
    assert response.status_code == 422
    assert exported(chat)[1]["mes"] == "one"


def test_a_raw_import_with_an_idempotency_key_imports_once(api):
    data = fixture_bytes("oldest_header.jsonl")
    for _ in range(2):
        response = api.generic(
            "POST", "/api/v1/chats/import", data, content_type="application/jsonl", HTTP_IDEMPOTENCY_KEY="imp-1"
        )
        assert response.status_code == 201
    assert Chat.objects.count() == 1
    assert json_lines(b"".join(api.get(f"/api/v1/chats/{response.json()['id']}/export").streaming_content)) == (
        json_lines(data)
    )
