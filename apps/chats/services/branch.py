"""Branching a chat at a message, as SillyTavern's "Branch" does: a new chat holding the messages up to it."""

from __future__ import annotations

import uuid

from django.db import transaction

from apps.chats.models import Chat, Message
from apps.chats.selectors import chat_characters_in_order
from apps.chats.services.chats import (
    EXPORT_CHUNK,
    MESSAGE_COLUMNS,
    chat_create,
    chat_lock,
    chat_touch,
    message_rows_insert,
)
from apps.common.exceptions import ApplicationError

BRANCH_SUFFIX = " (branch at #{index})"  # which message it branched at: a chat's branches are told apart


@transaction.atomic
def chat_branch(*, chat: Chat, index: int) -> Chat:
    """A new chat holding messages 0..`index` (inclusive) of `chat`, exactly as stored, with its characters (in
    order), persona, reply order and header; `chat_metadata` copied, with `main_chat` naming the chat it branched
    from and a fresh integrity slug, as SillyTavern writes a branch. The chat it came from is left as it is (read
    under its row lock, so no write moves its messages while they are copied). An index that is not one of its
    messages is a 400 naming `index`."""
    source = chat_lock(chat=chat)
    if not 0 <= index < source.message_count:
        last = source.message_count - 1
        raise ApplicationError(
            f"`index` is one of the chat's messages, 0 to {last}." if last >= 0 else "The chat has no messages.",
            {"field": "index", "total_messages": source.message_count},
        )
    metadata = dict(source.chat_metadata) if isinstance(source.chat_metadata, dict) else {}
    metadata.update(main_chat=source.title, integrity=str(uuid.uuid4()))
    suffix = BRANCH_SUFFIX.format(index=index)
    branch = chat_create(
        user=source.user,
        title=source.title[: 300 - len(suffix)] + suffix,
        character_ids=[character.pk for character in chat_characters_in_order(chat=source)],
        user_name=source.user_name,
        character_name=source.character_name,
        chat_metadata=metadata,
        persona_id=source.persona_id,
        reply_order=source.reply_order,
        create_date=source.create_date,
    )
    # The header as the source has it (a field its file did not have stays absent), now with chat_metadata.
    branch.user_name, branch.character_name = source.user_name, source.character_name
    branch.header_other_fields = dict(source.header_other_fields)
    branch.header_absent_fields = [key for key in source.header_absent_fields if key != "chat_metadata"]
    last = -1
    while True:
        rows = list(
            Message.objects.filter(chat_id=source.pk, index__gt=last, index__lte=index)
            .order_by("index")
            .values("index", *MESSAGE_COLUMNS)[:EXPORT_CHUNK]
        )
        if not rows:
            break
        message_rows_insert(chat_id=branch.pk, rows=rows)
        last = rows[-1]["index"]
    branch.message_count = index + 1
    fields = ["message_count", "user_name", "character_name", "header_other_fields", "header_absent_fields"]
    return chat_touch(chat=branch, fields=fields)
