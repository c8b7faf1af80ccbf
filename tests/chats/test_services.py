import uuid

import pytest

from apps.chats.jsonl import ImportLineError
from apps.chats.models import Character, Chat, Message
from apps.chats.services.chats import chat_export_lines, chat_import, chat_import_sample
from apps.chats.services.messages import message_append, message_delete, message_update
from apps.common.exceptions import ApplicationError
from tests.chats.helpers import FIXTURE_FILES, fixture_bytes, json_lines, stream

pytestmark = pytest.mark.django_db


def _export(chat: Chat) -> bytes:
    return b"".join(chat_export_lines(chat=chat))


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_import_then_export_gives_the_same_json_value_on_every_line(user, name):
    data = fixture_bytes(name)
    chat = chat_import(user=user, stream=stream(data), filename=name)
    assert json_lines(_export(chat)) == json_lines(data)


def test_import_counts_messages_and_sets_a_fresh_integrity(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("current_swipes.jsonl")), filename="a.jsonl")
    assert chat.message_count == 3 == Message.objects.filter(chat=chat).count()
    assert list(Message.objects.filter(chat=chat).values_list("index", flat=True)) == [0, 1, 2]
    # Our integrity is our own; the file's chat_metadata.integrity is kept verbatim for the round trip.
    assert str(chat.integrity) != chat.chat_metadata["integrity"]


def test_swipes_and_swipe_info_are_stored_in_their_columns(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("current_swipes.jsonl")))
    first = Message.objects.get(chat=chat, index=0)
    assert first.swipe_id == 0 and len(first.swipes) == 3 and len(first.swipe_info) == 3
    assert first.swipe_info[0]["extra"]["auto_recap_memory"]["memory"] == "Seraphina greets."
    assert first.other_fields["gen_started"] == "2026-09-25T23:59:20.000Z"


def test_headerless_group_file_exports_without_a_header(user):
    data = fixture_bytes("group_headerless.jsonl")
    chat = chat_import(user=user, stream=stream(data), filename="Tavern group.jsonl")
    assert chat.has_header is False
    assert chat.message_count == 5
    assert chat.title == "Tavern group"
    assert sorted(c.name for c in chat.characters.all()) == ["Bram", "Lysa"]
    assert json_lines(_export(chat))[0]["name"] == "Narrator"


def test_import_links_the_header_character_reusing_an_existing_one(user):
    aqua = Character.objects.create(user=user, name="Aqua")
    chat = chat_import(user=user, stream=stream(fixture_bytes("v112_header.jsonl")))
    assert list(chat.characters.all()) == [aqua]


def test_import_with_another_users_character_is_refused(user, other_user):
    theirs = Character.objects.create(user=other_user, name="Theirs")
    with pytest.raises(ApplicationError) as caught:
        chat_import(user=user, stream=stream(fixture_bytes("v112_header.jsonl")), character_ids=[theirs.pk])
    assert caught.value.extra["field"] == "character_ids"
    assert not Chat.objects.exists()


def test_malformed_line_stores_nothing(user):
    good = fixture_bytes("v112_header.jsonl").decode().splitlines()
    data = "\n".join([*good[:3], '{"name": "Aqua", "mes": "unterminated', *good[3:]]).encode()
    with pytest.raises(ImportLineError) as caught:
        chat_import(user=user, stream=stream(data))
    assert caught.value.extra["line"] == 4
    assert not Chat.objects.exists() and not Message.objects.exists() and not Character.objects.exists()


def test_malformed_line_after_a_full_batch_stores_nothing(user):
    lines = ['{"user_name":"You","character_name":"Aqua"}'] + ['{"name":"Aqua","mes":"hi"}'] * 2500 + ["oops"]
    with pytest.raises(ImportLineError) as caught:
        chat_import(user=user, stream=stream("\n".join(lines).encode()))
    assert caught.value.extra["line"] == 2502
    assert not Message.objects.exists()


def test_empty_file_is_refused(user):
    with pytest.raises(ApplicationError, match="empty"):
        chat_import(user=user, stream=stream(b"\n  \n"))


def test_sample_story_loads_with_its_character_card(user):
    chat = chat_import_sample(user=user)
    assert chat.message_count > 15
    mira = chat.characters.get()
    assert mira.name == "Mira" and "lighthouse" in mira.description
    assert Message.objects.filter(chat=chat, is_system=True).count() >= 2
    assert Message.objects.filter(chat=chat, swipe_id__isnull=False).exists()


def test_append_update_delete_keep_indices_contiguous_and_change_integrity(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("group_headerless.jsonl")))
    seen = {chat.integrity}
    message, chat = message_append(chat=chat, data={"name": "Player", "is_user": True, "mes": "new"})
    assert message.index == 5 and chat.message_count == 6
    seen.add(chat.integrity)
    _, chat = message_update(chat=chat, index=2, data={"mes": "edited", "swipe_id": 1})
    seen.add(chat.integrity)
    chat = message_delete(chat=chat, index=1)
    seen.add(chat.integrity)
    assert len(seen) == 4
    rows = list(Message.objects.filter(chat=chat).order_by("index").values_list("index", "mes"))
    assert rows == [(0, "The tavern is loud tonight."), (1, "edited"), (2, "I'll pay."), (3, "A hero!"), (4, "new")]
    assert chat.message_count == 5


def test_appended_message_exports_with_sillytavern_keys(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("oldest_header.jsonl")))
    message_append(chat=chat, data={"mes": "hello", "other_fields": {"is_name": True}})
    last = json_lines(_export(Chat.objects.get(pk=chat.pk)))[-1]
    assert last["mes"] == "hello" and last["is_name"] is True
    assert {"name", "is_user", "is_system", "send_date", "extra"} <= set(last)


def test_update_of_a_mistyped_field_replaces_the_verbatim_value(user):
    data = b'{"user_name":"a","character_name":"b"}\n{"name":"x","mes":"m","is_user":"yes"}'
    chat = chat_import(user=user, stream=stream(data))
    message, _ = message_update(chat=chat, index=0, data={"is_user": True})
    assert message.is_user is True and "is_user" not in message.other_fields


def test_swipe_id_out_of_range_is_refused(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("group_headerless.jsonl")))
    with pytest.raises(ApplicationError) as caught:
        message_update(chat=chat, index=2, data={"swipe_id": 5})
    assert caught.value.extra["field"] == "swipe_id"


def test_integrity_is_a_uuid(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("oldest_header.jsonl")))
    assert isinstance(chat.integrity, uuid.UUID)
