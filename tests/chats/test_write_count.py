"""Chat.writes: every write counts one, the count never goes back, and every answer a client syncs by carries it (the
SillyTavern extension compares it to tell a database restored from an older backup from deletions)."""

import json

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_touch
from tests.chats.helpers import if_match
from tests.chats.test_write_append import NEW

pytestmark = pytest.mark.django_db


def _writes(chat) -> int:
    return Chat.objects.get(pk=chat.pk).writes


def test_each_write_counts_one_and_each_answer_says_the_count(api, chat):
    counted = _writes(chat)
    appended = api.post(
        f"/api/v1/chats/{chat.pk}/append", {"messages": [NEW]}, format="json", **if_match(chat.integrity)
    )
    assert appended.status_code == 200, appended.content
    assert appended.json()["writes"] == counted + 1 == _writes(chat)

    patched = api.generic(
        "PATCH", f"/api/v1/chats/{chat.pk}/metadata", json.dumps({"note": "x"}),
        content_type="application/merge-patch+json", **if_match(appended.json()["integrity"]),
    )  # fmt: skip
    assert patched.status_code == 200, patched.content
    assert patched.json()["writes"] == counted + 2

    edited = api.patch(
        f"/api/v1/chats/{chat.pk}/messages/0/", {"mes": "Edited"}, format="json",
        **if_match(patched.json()["integrity"]),
    )  # fmt: skip
    assert edited.status_code == 200, edited.content
    assert edited.json()["writes"] == counted + 3

    for url in (f"/api/v1/chats/{chat.pk}/delta", f"/api/v1/chats/{chat.pk}/messages/", f"/api/v1/chats/{chat.pk}/"):
        assert api.get(url).json()["writes"] == counted + 3, url


def test_a_write_through_an_instance_read_before_another_write_counts_on_from_the_database(chat):
    before = _writes(chat)
    stale = Chat.objects.get(pk=chat.pk)
    chat_touch(chat=Chat.objects.get(pk=chat.pk))
    chat_touch(chat=Chat.objects.get(pk=chat.pk))
    touched = chat_touch(chat=stale)  # read before the two writes above: its own number is two behind
    assert touched.writes == before + 3 == _writes(chat)


def test_an_admin_save_of_a_chat_read_before_other_writes_counts_on_from_the_database(chat, rf):
    """The admin's change form saves the whole row it loaded: the count of writes it read must not be written back
    over writes made since (a client would take the lower count for a restored backup)."""
    from django.contrib import admin

    from apps.chats.admin import ChatAdmin

    loaded = Chat.objects.get(pk=chat.pk)
    chat_touch(chat=Chat.objects.get(pk=chat.pk))
    chat_touch(chat=Chat.objects.get(pk=chat.pk))
    before = _writes(chat)
    ChatAdmin(Chat, admin.site).save_model(rf.post("/admin/"), loaded, form=None, change=True)
    assert _writes(chat) == before + 1


def test_the_count_has_a_default_in_the_database_and_no_check_to_scan_for():
    """A process of the previous release, still serving during a rolling deploy, inserts chats without the column;
    and adding a column with a CHECK would scan the chat table under its lock."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_default, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'chats_chat' AND column_name = 'writes'"
        )
        assert cursor.fetchone() == ("0", "NO")
        cursor.execute(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'chats_chat'::regclass AND contype = 'c' "
            "AND pg_get_constraintdef(oid) LIKE '%%writes%%'"
        )
        assert cursor.fetchone()[0] == 0
