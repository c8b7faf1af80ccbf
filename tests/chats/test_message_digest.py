"""Each message's MD5 (Message.mes_md5, apps/chats/migrations/0010), which the gateway compares a request's history
by: the database keeps it with every write of the text, whichever path writes it, and the migration fills it for the
messages a database already holds, changing nothing else."""

from __future__ import annotations

import hashlib

import pytest

from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.chats.services.patch import chat_patch
from apps.chats.services.writes import chat_append
from apps.gateway.services.request import Line
from apps.gateway.services.sync import history_sync
from tests.migrating import leaves, migrate

TEXTS = ["", "Hello.", 'Café, naïve — 🐉 and \\n escapes "quoted"', "A long telling. " * 400]  # the last is TOASTed


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def digests(chat) -> list[tuple[str, str]]:
    return [(m.mes, m.mes_md5) for m in Message.objects.filter(chat=chat).order_by("index")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_the_digest_of_every_message_and_keeps_the_rows(user):
    today = leaves()
    old = (
        migrate([("chats", "0009_character_extra_books")])
        .loader.project_state([("chats", "0009_character_extra_books")])
        .apps
    )
    chat = old.get_model("chats", "Chat").objects.create(user_id=user.pk, title="Kept", message_count=len(TEXTS))
    for index, text in enumerate(TEXTS):
        old.get_model("chats", "Message").objects.create(
            chat_id=chat.pk, index=index, name="Mira", mes=text, extra={"kept": index}, swipes=[text], swipe_id=0
        )

    migrate(today)
    rows = list(Message.objects.filter(chat_id=chat.pk).order_by("index"))
    assert [(m.mes, m.mes_md5) for m in rows] == [(text, md5(text)) for text in TEXTS]
    assert [(m.name, m.extra, m.swipes, m.swipe_id) for m in rows] == [
        ("Mira", {"kept": index}, [text], 0) for index, text in enumerate(TEXTS)
    ]


@pytest.mark.django_db
def test_every_write_of_the_text_keeps_its_digest(user):
    chat = chat_create(user=user, title="Harbour", character_name="Mira", user_name="Rowan")
    lines = [{"name": "Mira", "is_user": False, "mes": text} for text in TEXTS]
    chat = chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat  # COPY
    assert digests(chat) == [(text, md5(text)) for text in TEXTS]

    patch = [{"op": "replace", "path": "/1/mes", "value": "Goodbye."}, {"op": "remove", "path": "/0"}]
    chat = chat_patch(chat=chat, operations=patch, integrity=chat.integrity).chat
    Message.objects.filter(chat=chat, index=2).update(mes="Updated in place.")
    assert digests(chat) == [
        ("Goodbye.", md5("Goodbye.")), (TEXTS[2], md5(TEXTS[2])), ("Updated in place.", md5("Updated in place."))
    ]  # fmt: skip
    message = Message.objects.get(chat=chat, index=0)
    message.mes = "Saved."
    message.save()
    assert Message.objects.get(pk=message.pk).mes_md5 == md5("Saved.")


@pytest.mark.django_db
def test_the_gateway_sees_an_edit_made_by_another_client(user):
    chat = chat_create(user=user, title="Harbour", character_name="Mira", user_name="Rowan")
    lines = [{"name": "Mira", "is_user": False, "mes": "The lantern is lit."}, {"name": "Rowan", "is_user": True,
             "mes": "Any ships?"}]  # fmt: skip
    chat = chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat
    patch = [{"op": "replace", "path": "/0/mes", "value": "The lantern is out."}]
    chat = chat_patch(chat=chat, operations=patch, integrity=chat.integrity).chat  # SillyTavern, say

    asked = [Line("assistant", "The lantern is out."), Line("user", "Any ships?"), Line("user", "Which?")]
    synced = history_sync(chat=chat, lines=asked)
    assert synced.written == {"appended": 0, "edited": 0, "deleted": 0} and synced.indices[:2] == [0, 1]
    assert synced.message == "Which?"
    asked = [Line("assistant", "The lantern is lit."), Line("user", "Any ships?"), Line("assistant", "One.")]
    synced = history_sync(chat=synced.chat, lines=[*asked, Line("user", "Which?")])
    assert synced.written == {"appended": 1, "edited": 1, "deleted": 0}
    assert Message.objects.get(chat=chat, index=0).mes_md5 == md5("The lantern is lit.")
