"""Saving a whole chat over the API (SillyTavern's save): the chat replaced, stale integrities refused or forced
with a restorable revision, and refused saves that change nothing."""

import json

import pytest

from apps.chats.models import Chat, ChatRevision
from tests.chats.helpers import exported, fixture_bytes, fresh, if_match, json_lines

pytestmark = pytest.mark.django_db


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
    assert fresh(chat).message_count == 3


def test_a_save_with_integers_beyond_64_bits(api, chat):
    lines = [{"user_name": "a", "character_name": "b"}, {"mes": "x", "extra": {"seed": 2**70, "small": 1.5}}]
    body = json.dumps({"chat": lines, "integrity": str(chat.integrity)})
    response = api.generic("POST", f"/api/v1/chats/{chat.pk}/save", body, content_type="application/json")
    assert response.status_code == 200, response.content
    assert exported(chat) == lines


def test_a_headerless_save_leaves_no_old_header_behind(api, chat):
    saved = api.post(
        f"/api/v1/chats/{chat.pk}/save",
        {"chat": [{"name": "Bram", "mes": "Ale!"}], "integrity": str(chat.integrity)},
        format="json",
    )
    assert exported(chat) == [{"name": "Bram", "mes": "Ale!"}]
    patched = api.generic(
        "PATCH",
        f"/api/v1/chats/{chat.pk}/metadata",
        '{"a": 1}',
        content_type="application/merge-patch+json",
        **if_match(saved.json()["integrity"]),
    )
    assert patched.status_code == 200
    assert exported(chat)[0] == {"chat_metadata": {"a": 1}}


def test_a_save_with_a_lone_surrogate_is_refused_naming_the_item(api, chat):
    def save(items: str):
        body = '{"chat": [' + items + '], "integrity": "' + str(Chat.objects.get(pk=chat.pk).integrity) + '"}'
        return api.generic("POST", f"/api/v1/chats/{chat.pk}/save", body, content_type="application/json")

    response = save('{"user_name": "a"}, {"mes": "ok"}, {"mes": "bad \\ud800 here"}')
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == "chat[2]"
    # An escape of a pair sends the body to the pure-Python parser, whose own errors were a 500 (ValueError).
    for broken in ('{"mes": "\\ud83d\\ude00"}, {"mes": "\\q"}', '{"mes": "\\ud83d\\ude00"}, {"mes": "a\tb"}'):
        response = save(broken)
        assert response.status_code == 400 and response.json()["extra"]["field"] == "body", response.content[:300]
    assert save('{"user_name": "a"}, {"mes": "emoji \\ud83d\\ude00"}').status_code == 200
    assert exported(chat)[1]["mes"] == "emoji 😀"
