"""Message writes through the REST API (the incremental sync endpoints build on these)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.chats.jsonl import MESSAGE_FIELDS, split_fields
from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_lock, chat_touch, message_line, message_lines_append
from apps.common.exceptions import ApplicationError


def _check_swipes(line: dict[str, Any]) -> None:
    swipes, swipe_id = line.get("swipes"), line.get("swipe_id")
    if isinstance(swipes, list) and isinstance(swipe_id, int) and not 0 <= swipe_id < max(len(swipes), 1):
        raise ApplicationError(
            f"swipe_id {swipe_id} is out of range for {len(swipes)} swipe(s).", {"field": "swipe_id"}
        )


def _line_from_input(data: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """`base` with the given known fields replaced; `other_fields`, when given, replaces all unknown keys."""
    if "other_fields" in data:
        clash = sorted(set(data["other_fields"]) & set(MESSAGE_FIELDS))
        if clash:
            raise ApplicationError(
                f"other_fields may not carry known message fields: {', '.join(clash)}.", {"field": "other_fields"}
            )
        base = {key: value for key, value in base.items() if key in MESSAGE_FIELDS} | data["other_fields"]
    line = base | {key: data[key] for key in MESSAGE_FIELDS if key in data}
    _check_swipes(line)
    return line


def _apply_line(message: Message, line: dict[str, Any]) -> Message:
    columns, other, absent = split_fields(line, MESSAGE_FIELDS)
    for key, value in columns.items():
        setattr(message, key, value)
    message.other_fields, message.absent_fields = other, absent
    return message


def message_as_line(message: Message) -> dict[str, Any]:
    row = {key: getattr(message, key) for key in (*MESSAGE_FIELDS, "other_fields", "absent_fields")}
    return message_line(row)


@transaction.atomic
def message_append(*, chat: Chat, data: dict[str, Any], integrity: uuid.UUID | None = None) -> tuple[Message, Chat]:
    """Add a message at the end. Keys SillyTavern always writes get its defaults when not given."""
    chat = chat_lock(chat=chat, integrity=integrity)
    defaults = {"name": "", "is_user": False, "is_system": False, "send_date": timezone.now().isoformat(), "extra": {}}
    line = _line_from_input(data, defaults)
    index = chat.message_count
    chat = message_lines_append(chat=chat, lines=[line])
    return Message.objects.get(chat=chat, index=index), chat


@transaction.atomic
def message_update(
    *, chat: Chat, index: int, data: dict[str, Any], integrity: uuid.UUID | None = None
) -> tuple[Message, Chat]:
    chat = chat_lock(chat=chat, integrity=integrity)
    message = Message.objects.get(chat=chat, index=index)
    _apply_line(message, _line_from_input(data, message_as_line(message)))
    message.save()
    return message, chat_touch(chat=chat)


@transaction.atomic
def message_delete(*, chat: Chat, index: int, integrity: uuid.UUID | None = None) -> Chat:
    """Remove one message; the ones after it move up by one, so indices stay 0..n-1 without gaps."""
    chat = chat_lock(chat=chat, integrity=integrity)
    deleted, _ = Message.objects.filter(chat=chat, index=index).delete()
    if not deleted:
        raise Message.DoesNotExist
    Message.objects.filter(chat=chat, index__gt=index).update(index=F("index") - 1)
    chat.message_count -= 1
    return chat_touch(chat=chat, fields=["message_count"])
