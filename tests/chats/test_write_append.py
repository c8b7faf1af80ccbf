import pytest

from apps.chats.models import Chat, SeenGeneration
from tests.chats.helpers import exported, if_match

pytestmark = pytest.mark.django_db

NEW = {
    "name": "You",
    "is_user": True,
    "is_system": False,
    "send_date": "2026-10-01T10:00:00Z",
    "mes": "Hi",
    "extra": {},
}


def _append(api, chat, body, integrity=None):
    headers = if_match(integrity or chat.integrity)
    return api.post(f"/api/v1/chats/{chat.pk}/append", body, format="json", **headers)


def test_append_adds_messages_and_answers_the_new_integrity(api, chat):
    before = exported(chat)
    response = _append(api, chat, {"messages": [NEW, {**NEW, "mes": "Second"}]})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["appended"] == 2 and body["skipped"] == 0 and body["total_messages"] == 5
    assert body["integrity"] != str(chat.integrity)
    assert response["ETag"] == f'"{body["integrity"]}"'
    assert exported(chat) == before + [NEW, {**NEW, "mes": "Second"}]


def test_append_accepts_the_integrity_in_the_body(api, chat):
    response = api.post(
        f"/api/v1/chats/{chat.pk}/append", {"messages": [NEW], "integrity": str(chat.integrity)}, format="json"
    )
    assert response.status_code == 200


def test_append_retry_does_not_duplicate_last_message(api, chat):
    first = _append(api, chat, {"messages": [NEW]}).json()
    # The first answer was lost: the client retries with the integrity it had before.
    retry = _append(api, chat, {"messages": [NEW]}, integrity=chat.integrity)
    assert retry.status_code == 200
    assert retry.json() | {"skipped": 1} == {
        "appended": 0,
        "skipped": 1,
        "total_messages": 4,
        "integrity": first["integrity"],
        "writes": first["writes"],  # the retry wrote nothing
    }
    assert exported(chat)[-2:] != [NEW, NEW]


def test_append_retry_of_several_messages_is_recognised(api, chat):
    batch = [NEW, {**NEW, "mes": "two"}, {**NEW, "mes": "three"}]
    _append(api, chat, {"messages": batch})
    retry = _append(api, chat, {"messages": batch}, integrity=chat.integrity).json()
    assert retry["appended"] == 0 and retry["skipped"] == 3 and retry["total_messages"] == 6


def test_append_retry_by_generation_id_survives_in_the_database(api, chat):
    first = _append(api, chat, {"messages": [NEW], "generation_id": "gen-1"}).json()
    assert SeenGeneration.objects.filter(chat=chat, generation_id="gen-1").exists()
    # A different body (the client regenerated its timestamp) but the same generation: still a retry.
    retry = _append(api, chat, {"messages": [{**NEW, "send_date": "later"}], "generation_id": "gen-1"}).json()
    assert retry["appended"] == 0 and retry["integrity"] == first["integrity"]
    assert Chat.objects.get(pk=chat.pk).message_count == 4


def test_append_with_a_stale_integrity_answers_409_and_changes_nothing(api, chat):
    _append(api, chat, {"messages": [NEW]})
    before = exported(chat)
    response = _append(api, chat, {"messages": [{**NEW, "mes": "from another tab"}]}, integrity=chat.integrity)
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "integrity" and body["total_messages"] == 4
    assert body["current_integrity"] == str(Chat.objects.get(pk=chat.pk).integrity)
    assert exported(chat) == before


def test_append_without_integrity_answers_428(api, chat):
    response = api.post(f"/api/v1/chats/{chat.pk}/append", {"messages": [NEW]}, format="json")
    assert response.status_code == 428 and response.json()["error"] == "integrity_required"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": "x"}, "messages"),
        ({"messages": [1]}, "messages[0]"),
        ({"messages": [{"mes": "\u0000"}]}, "messages[0]"),
    ],
)
def test_append_bad_input_answers_400_and_changes_nothing(api, chat, body, field):
    before = exported(chat)
    response = _append(api, chat, body)
    assert response.status_code == 400
    assert field in str(response.json())
    assert exported(chat) == before


def test_append_to_another_users_chat_is_404(other_api, chat):
    assert _append(other_api, chat, {"messages": [NEW]}).status_code == 404
