import json

import pytest

from apps.chats.models import Chat
from apps.sync.models import ChatRevision
from tests.chats.factories import ChatFactory, add_messages
from tests.chats.helpers import fixture_bytes, json_lines
from tests.sync.helpers import exported, if_match

pytestmark = pytest.mark.django_db


def _fresh(chat):
    return Chat.objects.get(pk=chat.pk)


# ------------------------------------------------------------------------------------------------------ metadata


def test_merge_patch_is_a_true_deep_merge(api, chat):
    url = f"/api/v1/chats/{chat.pk}/metadata"
    patch = {"smartMemory": {"nested": {"deep": None, "added": 1}}, "attachments": ["a"], "tainted": None}
    response = api.generic(
        "PATCH", url, json.dumps(patch), content_type="application/merge-patch+json", **if_match(chat.integrity)
    )
    assert response.status_code == 200, response.content
    metadata = response.json()["chat_metadata"]
    assert metadata["smartMemory"] == {"v": 7, "nested": {"added": 1}}  # v untouched, deep deleted
    assert metadata["attachments"] == ["a"] and "tainted" not in metadata
    assert metadata["note_prompt"] == "Remember the 🗝️"
    assert exported(chat)[0]["chat_metadata"] == metadata


def test_json_patch_on_metadata(api, chat):
    ops = [{"op": "add", "path": "/smartMemory/v", "value": 8}, {"op": "test", "path": "/note_depth", "value": 4}]
    response = api.generic(
        "PATCH",
        f"/api/v1/chats/{chat.pk}/metadata",
        json.dumps(ops),
        content_type="application/json-patch+json",
        **if_match(chat.integrity),
    )
    assert response.status_code == 200 and response.json()["chat_metadata"]["smartMemory"]["v"] == 8


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        ('[{"op": "test", "path": "/note_depth", "value": 5}]', "application/json-patch+json", 409),
        ('[{"op": "nope", "path": "/x"}]', "application/json-patch+json", 400),
        ('"a string"', "application/merge-patch+json", 400),
        ('{"a": ', "application/merge-patch+json", 400),
        ('[{"op": "replace", "path": "", "value": [1]}]', "application/json-patch+json", 400),
    ],
)
def test_bad_metadata_patches_change_nothing(api, chat, body, content_type, status):
    response = api.generic(
        "PATCH", f"/api/v1/chats/{chat.pk}/metadata", body, content_type=content_type, **if_match(chat.integrity)
    )
    assert response.status_code == status
    assert _fresh(chat).chat_metadata == chat.chat_metadata


def test_metadata_patch_needs_if_match(api, chat):
    response = api.generic(
        "PATCH", f"/api/v1/chats/{chat.pk}/metadata", "{}", content_type="application/merge-patch+json"
    )
    assert response.status_code == 428


# --------------------------------------------------------------------------------------------------------- delta


def test_delta_pages_through_a_chat(api, user):
    chat = ChatFactory(user=user, chat_metadata={"k": 1})
    add_messages(chat, 7)
    page = api.get(f"/api/v1/chats/{chat.pk}/delta?from_index=2&limit=3").json()
    assert [m["mes"] for m in page["messages"]] == ["message 2", "message 3", "message 4"]
    assert page["next_index"] == 5 and page["has_more"] and page["total_messages"] == 7
    assert page["chat_metadata"] == {"k": 1} and page["integrity"] == str(chat.integrity)
    last = api.get(f"/api/v1/chats/{chat.pk}/delta?from_index=5&limit=3").json()
    assert last["has_more"] is False and last["next_index"] is None


# ---------------------------------------------------------------------------------------------------------- save


def _save(api, chat, lines, integrity=None, force=None):
    body = {"chat": lines}
    if integrity is not None:
        body["integrity"] = str(integrity)
    if force is not None:
        body["force"] = force
    return api.post(f"/api/v1/chats/{chat.pk}/save", body, format="json")


def test_save_replaces_the_whole_chat(api, chat):
    lines = json_lines(fixture_bytes("v112_header.jsonl"))
    response = _save(api, chat, lines, integrity=chat.integrity)
    assert response.status_code == 200, response.content
    assert response.json()["total_messages"] == 3
    assert exported(chat) == lines


def test_save_with_a_stale_integrity_is_409_and_force_keeps_a_restorable_revision(api, chat):
    original = exported(chat)
    stale = "00000000-0000-4000-8000-000000000000"
    replacement = json_lines(fixture_bytes("oldest_header.jsonl"))
    assert _save(api, chat, replacement, integrity=stale).status_code == 409
    assert exported(chat) == original
    forced = _save(api, chat, replacement, integrity=stale, force=True)
    assert forced.status_code == 200 and exported(chat) == replacement
    revision = ChatRevision.objects.get(chat=chat)
    assert revision.reason == "forced save" and revision.message_count == 3
    listed = api.get(f"/api/v1/chats/{chat.pk}/revisions/").json()
    assert [r["id"] for r in listed] == [revision.pk]
    download = api.get(f"/api/v1/chats/{chat.pk}/revisions/{revision.pk}/export")
    assert json_lines(b"".join(download.streaming_content)) == original
    restored = api.post(
        f"/api/v1/chats/{chat.pk}/revisions/{revision.pk}/restore", **if_match(forced.json()["integrity"])
    )
    assert restored.status_code == 200 and exported(chat) == original
    assert ChatRevision.objects.filter(chat=chat).count() == 2  # the restore is undoable too


def test_save_without_integrity_or_force_is_428(api, chat):
    assert _save(api, chat, json_lines(fixture_bytes("oldest_header.jsonl"))).status_code == 428


@pytest.mark.parametrize(
    ("lines", "field"), [([{"user_name": "a"}, 5], "chat[1]"), ([{"user_name": "a"}, {"mes": "\u0000"}], "chat[1]")]
)
def test_bad_save_answers_400_naming_the_item_and_changes_nothing(api, chat, lines, field):
    before = exported(chat)
    response = _save(api, chat, lines, integrity=chat.integrity)
    assert response.status_code == 400 and response.json()["extra"]["field"] == field
    assert exported(chat) == before


def test_oversized_save_is_413(api, chat, settings):
    settings.LOREKEEPER_MAX_IMPORT_BYTES = 2000
    response = _save(api, chat, [{"user_name": "a"}, {"mes": "x" * 5000}], integrity=chat.integrity)
    assert response.status_code == 413
    assert _fresh(chat).message_count == 3


# ----------------------------------------------------------------------------------------------- extension data


def test_extension_data_is_merged_and_copied_to_the_current_swipe(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/0/data/auto_recap_memory"
    response = api.patch(
        url, {"values": {"scene_break": True, "include": None}}, format="json", **if_match(chat.integrity)
    )
    assert response.status_code == 200, response.content
    body = response.json()
    # The keys already there are kept, the new ones set; null is stored as null.
    assert (
        body["data"] == {"memory": None, "scene_break": True, "include": None} or body["data"]["scene_break"] is True
    )
    message = exported(chat)[1]
    assert message["extra"]["auto_recap_memory"]["scene_break"] is True
    assert message["swipe_info"][0]["extra"]["auto_recap_memory"] == message["extra"]["auto_recap_memory"]
    assert body["swipe_data"] == message["extra"]["auto_recap_memory"]


def test_each_swipe_keeps_its_own_data_and_a_switch_leaves_extra_stale(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/0/data/ns"
    integrity = api.patch(url, {"values": {"memory": "swipe 0"}}, format="json", **if_match(chat.integrity)).json()[
        "integrity"
    ]
    switched = api.post(
        f"/api/v1/chats/{chat.pk}/patch",
        {"operations": [{"op": "replace", "path": "/0/swipe_id", "value": 1}]},
        format="json",
        **if_match(integrity),
    ).json()
    stale = api.get(url).json()
    assert stale["data"] == {"memory": "swipe 0"} and stale["swipe_id"] == 1 and stale["swipe_data"] is None
    api.patch(url, {"values": {"memory": "swipe 1"}}, format="json", **if_match(switched["integrity"]))
    message = exported(chat)[1]
    assert message["swipe_info"][0]["extra"]["ns"] == {"memory": "swipe 0"}
    assert message["swipe_info"][1]["extra"]["ns"] == {"memory": "swipe 1"}
    assert message["extra"]["ns"] == {"memory": "swipe 1"}


def test_extension_data_on_a_message_without_swipes(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/1/data/bme"
    response = api.patch(url, {"values": {"x": 1}}, format="json", **if_match(chat.integrity))
    assert response.status_code == 200 and response.json()["swipe_data"] is None
    assert api.get(f"/api/v1/chats/{chat.pk}/messages/9/data/bme").status_code == 404


# ------------------------------------------------------------------------------------------------------ settings


def test_settings_document_merge_and_json_patch(api):
    first = api.get("/api/v1/settings")
    assert first.json()["settings"] == {}
    merged = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"smartMemory": {"budget": 500, "slots": {"a": 1}}}),
        content_type="application/merge-patch+json",
        **if_match(first.json()["integrity"]),
    )
    assert merged.status_code == 200
    patched = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps([{"op": "replace", "path": "/smartMemory/budget", "value": 600}]),
        content_type="application/json-patch+json",
        **if_match(merged.json()["integrity"]),
    )
    assert patched.json()["settings"] == {"smartMemory": {"budget": 600, "slots": {"a": 1}}}
    stale = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"x": {}}),
        content_type="application/merge-patch+json",
        **if_match(merged.json()["integrity"]),
    )
    assert stale.status_code == 409 and stale.json()["error"] == "integrity"


def test_settings_must_stay_namespaced(api):
    integrity = api.get("/api/v1/settings").json()["integrity"]
    response = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"budget": 5}),
        content_type="application/merge-patch+json",
        **if_match(integrity),
    )
    assert response.status_code == 400 and response.json()["extra"]["field"] == "settings"


def test_settings_are_per_user(api, other_api):
    integrity = api.get("/api/v1/settings").json()["integrity"]
    api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps({"mine": {"secret": 1}}),
        content_type="application/merge-patch+json",
        **if_match(integrity),
    )
    assert other_api.get("/api/v1/settings").json()["settings"] == {}


# --------------------------------------------------------------------------------------------------- idempotency


def test_a_retry_with_the_same_idempotency_key_answers_the_first_answer(api, chat):
    body = {"operations": [{"op": "add", "path": "/-", "value": {"name": "You", "is_user": True, "mes": "Once"}}]}
    headers = {**if_match(chat.integrity), "HTTP_IDEMPOTENCY_KEY": "key-1"}
    first = api.post(f"/api/v1/chats/{chat.pk}/patch", body, format="json", **headers)
    # The first answer was lost on the wire; the client sends the very same request again.
    again = api.post(f"/api/v1/chats/{chat.pk}/patch", body, format="json", **headers)
    assert again.status_code == 200 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and again["ETag"] == first["ETag"]
    assert _fresh(chat).message_count == 4


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
    assert _fresh(chat).message_count == 3


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


def test_sync_endpoints_are_404_for_other_users(other_api, chat):
    base = f"/api/v1/chats/{chat.pk}"
    h = if_match(chat.integrity)
    assert other_api.get(f"{base}/delta").status_code == 404
    assert other_api.get(f"{base}/metadata").status_code == 404
    assert other_api.get(f"{base}/revisions/").status_code == 404
    assert other_api.get(f"{base}/messages/0/data/ns").status_code == 404
    assert (
        other_api.post(
            f"{base}/patch", {"operations": [{"op": "remove", "path": "/0"}]}, format="json", **h
        ).status_code
        == 404
    )
    assert (
        other_api.post(f"{base}/save", {"chat": [{"user_name": "x"}], "force": True}, format="json").status_code == 404
    )
    assert other_api.patch(f"{base}/messages/0/data/ns", {"values": {"a": 1}}, format="json", **h).status_code == 404
    assert exported(chat)[1]["mes"].startswith("*She smiles.*")
