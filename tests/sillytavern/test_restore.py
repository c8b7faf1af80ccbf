"""The extension in a real SillyTavern 1.19 and Chromium, when Lorekeeper's database is restored from an older
backup: the chat there lacks what was written since, and SillyTavern's file must not lose it."""

from __future__ import annotations

import pytest
from django.db import transaction

from apps.chats.models import Chat, ChatRevision, Message
from tests.sillytavern.harness import Relay, live_chat, open_character, send_message
from tests.sillytavern.test_extension import assert_mirrored, save

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGE_FIELDS = [field.attname for field in Message._meta.concrete_fields if not field.generated]
CHAT_FIELDS = ["integrity", "writes", "message_count", "chat_metadata", "mirrored_integrity"]


def chat_backup(user) -> dict:
    """What a backup of the database holds of the user's one chat: its row and its messages."""
    chat = Chat.objects.get(user=user)
    return {
        "chat": {name: getattr(chat, name) for name in CHAT_FIELDS},
        "messages": list(Message.objects.filter(chat=chat).values(*MESSAGE_FIELDS)),
    }


def chat_restore(user, backup: dict) -> None:
    """The chat put back as the backup held it, rows and ids, as restoring the database does."""
    chat = Chat.objects.get(user=user)
    with transaction.atomic():
        Message.objects.filter(chat=chat).delete()
        Message.objects.bulk_create(Message(**row) for row in backup["messages"])
        Chat.objects.filter(pk=chat.pk).update(**backup["chat"])


def test_a_chat_restored_from_an_older_backup_gets_back_what_the_file_holds(
    st, st_open, llm_server, lorekeeper, live_server
):
    llm_server.default.content = "Noted."
    relay = Relay(int(live_server.url.rsplit(":", 1)[1]))
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension=lorekeeper.extension_settings(server_url=relay.url, timeout_ms=3000, inject=False))
    open_character(page, "Mira")
    save(page)
    assert_mirrored(st, page, lorekeeper.user, "opening the chat")
    send_message(page, "Before the backup.")
    assert_mirrored(st, page, lorekeeper.user, "the first exchange")
    backup = chat_backup(lorekeeper.user)
    send_message(page, "After the backup.")
    assert_mirrored(st, page, lorekeeper.user, "the second exchange")

    # The operator stops Lorekeeper, restores the backup and starts it again.
    relay.down()
    chat_restore(lorekeeper.user, backup)
    assert Chat.objects.get(user=lorekeeper.user).message_count == 3
    relay.up()

    send_message(page, "After the restore.")
    assert_mirrored(st, page, lorekeeper.user, "the restore")
    texts = [message["mes"] for message in live_chat(page)]
    assert texts == ["Welcome back.", "Before the backup.", "Noted.", "After the backup.", "Noted.",
                     "After the restore.", "Noted."]  # fmt: skip
    chat = Chat.objects.get(user=lorekeeper.user)
    assert ChatRevision.objects.filter(chat=chat, message_count=3).exists(), "the restored copy is kept as a revision"
    relay.down()
