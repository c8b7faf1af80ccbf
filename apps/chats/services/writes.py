"""The incremental write path for chats (Luker's append / patch / metadata, SillyTavern's save: docs/GLOSSARY.md),
and delta reads.

Every write takes the chat's row lock and compares the integrity the client last saw in the same transaction, so
the check and the write are one step: of several writers holding the same integrity exactly one wins, the others
answer 409 and change nothing.
"""

from __future__ import annotations

import gzip
import io
import uuid
from dataclasses import dataclass
from typing import Any, BinaryIO

from django.db import transaction

from apps.chats.jsonl import HEADER_FIELDS
from apps.chats.models import Chat, ChatRevision, Message, SeenGeneration
from apps.chats.selectors import chat_get, revision_get, revision_stream
from apps.chats.services.chats import (
    MESSAGE_COLUMNS,
    IntegrityConflict,
    chat_characters_set,
    chat_export_lines,
    chat_import,
    chat_load_jsonl,
    chat_lock,
    chat_touch,
    chat_update,
    client_key_check,
    client_key_lock,
    message_line,
    message_lines_append,
    owned_characters,
    repeatable_read,
)
from apps.common import jsonpatch
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason

MAX_APPEND_MESSAGES = 1000


@dataclass
class WriteResult:
    chat: Chat
    applied: int = 0
    skipped: int = 0


def _check_messages(messages: list[Any]) -> None:
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ApplicationError(f"messages[{i}] is not a JSON object.", {"field": f"messages[{i}]"})
        reason = unstorable_reason(message)
        if reason:
            raise ApplicationError(f"messages[{i}] {reason}.", {"field": f"messages[{i}]"})


def _last_lines(chat: Chat, count: int) -> list[dict[str, Any]]:
    rows = Message.objects.filter(chat=chat).order_by("-index").values(*MESSAGE_COLUMNS)[:count]
    return [message_line(row) for row in reversed(rows)]


def _ends_with(chat: Chat, incoming: list[dict[str, Any]]) -> bool:
    """Does the chat already end with exactly these messages (an append that landed, its answer lost)?"""
    tail = _last_lines(chat, len(incoming))
    return len(tail) == len(incoming) and all(jsonpatch.json_equal(a, b) for a, b in zip(tail, incoming, strict=True))


@transaction.atomic
def chat_append(
    *,
    chat: Chat,
    messages: list[dict[str, Any]],
    integrity: uuid.UUID,
    generation_id: str | None = None,
    mirror: bool = False,
) -> WriteResult:
    """Append messages at the end, at a cost independent of the chat's length.

    A retry is recognised and answered as a success with nothing doubled: a `generation_id` already seen for this
    chat (stored, so it survives restarts and is shared by every web worker), or, as Luker does, incoming messages
    deep-equal to the last stored one (dropped while they are). A retry whose first answer was lost carries the
    integrity from before that write: with a stale integrity, a request whose messages the chat already ends with
    is that retry; anything else is a conflict (409)."""
    if len(messages) > MAX_APPEND_MESSAGES:
        raise ApplicationError(f"At most {MAX_APPEND_MESSAGES} messages per append.", {"field": "messages"})
    _check_messages(messages)
    chat = chat_lock(chat=chat)
    if generation_id and SeenGeneration.objects.filter(chat=chat, generation_id=generation_id).exists():
        return WriteResult(chat=chat, skipped=len(messages))
    if chat.integrity != integrity:
        if messages and _ends_with(chat, messages):
            return WriteResult(chat=chat, skipped=len(messages))
        raise IntegrityConflict(chat)
    last = _last_lines(chat, 1)
    skipped = 0
    while last and skipped < len(messages) and jsonpatch.json_equal(messages[skipped], last[0]):
        skipped += 1
    new = messages[skipped:]
    if generation_id:
        SeenGeneration.objects.create(chat=chat, generation_id=generation_id)
    if new:
        message_lines_append(chat=chat, lines=new, mirror=mirror)
    return WriteResult(chat=chat, applied=len(new), skipped=skipped)


@transaction.atomic
def chat_metadata_patch(*, chat: Chat, patch: Any, kind: str, integrity: uuid.UUID, mirror: bool = False) -> Chat:
    """`kind` "merge": RFC 7386 (true deep merge, null deletes, arrays replace); "json": RFC 6902. Keys the patch
    does not mention are untouched."""
    chat = chat_lock(chat=chat, integrity=integrity)
    metadata = jsonpatch.patch_object(chat.chat_metadata, patch, kind=kind, what="chat_metadata")
    reason = unstorable_reason(metadata)
    if reason:
        raise ApplicationError(f"The patched chat_metadata {reason}.", {"field": "chat_metadata"})
    return chat_update(chat=chat, data={"chat_metadata": metadata}, mirror=mirror)


def _snapshot(chat: Chat, reason: str) -> ChatRevision:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6) as gz:
        for part in chat_export_lines(chat=chat):
            gz.write(part)
    return ChatRevision.objects.create(
        chat=chat,
        reason=reason,
        integrity=chat.integrity,
        message_count=chat.message_count,
        jsonl_gzip=buffer.getvalue(),
    )


def _replace_contents(chat: Chat, jsonl: BinaryIO, *, mirror: bool = True) -> Chat:
    Message.objects.filter(chat=chat).delete()
    for key, (_, default) in HEADER_FIELDS.items():
        setattr(chat, key, default())
    chat.header_other_fields, chat.header_absent_fields = {}, list(HEADER_FIELDS)
    chat_load_jsonl(chat=chat, stream=jsonl)
    return chat_touch(
        chat=chat,
        fields=[
            "message_count",
            "has_header",
            "user_name",
            "character_name",
            "create_date",
            "chat_metadata",
            "header_other_fields",
            "header_absent_fields",
        ],
        mirror=mirror,
    )


@transaction.atomic
def chat_save(*, chat: Chat, jsonl: BinaryIO, integrity: uuid.UUID | None, force: bool = False) -> Chat:
    """SillyTavern's full overwrite, for legacy clients: the whole chat (header line first, when it has one) as
    JSONL. A stale integrity answers 409 unless `force`; a forced save first keeps the replaced chat as a
    revision that can be restored, so no overwrite is silent or final."""
    chat = chat_lock(chat=chat)
    if integrity != chat.integrity:
        if not force:
            raise IntegrityConflict(chat)
        _snapshot(chat, reason="forced save")
    return _replace_contents(chat, jsonl)


@transaction.atomic
def chat_reimport(
    *, chat: Chat, jsonl: BinaryIO, integrity: uuid.UUID | None = None, title: str = "", client_key: str | None = None
) -> Chat:
    """Import a SillyTavern file again into the chat that came from it (the import's "update this chat" mode): its
    contents become the file's. What they replace is kept as a revision first, so nothing is lost. Given the
    integrity the client last saw, a chat changed since answers 409."""
    chat = chat_lock(chat=chat, integrity=integrity)
    if client_key is not None and client_key != chat.client_key:
        client_key_check(user=chat.user, client_key=client_key, chat=chat)
        chat.client_key = client_key
        chat.save(update_fields=["client_key"])
    if title:
        chat.title = title[:300]
        chat.save(update_fields=["title"])
    if chat.message_count or chat.has_header:
        _snapshot(chat, reason="import over the chat")
    return _replace_contents(chat, jsonl)


@transaction.atomic
def chat_import_or_update(
    *,
    user,
    stream: BinaryIO,
    filename: str = "",
    title: str = "",
    character_ids: list[int] | tuple[int, ...] = (),
    client_key: str | None = None,
    chat_id: int | None = None,
    integrity: uuid.UUID | None = None,
) -> tuple[Chat, bool]:
    """The import: a new chat, or an update of the one named by `chat_id` or holding `client_key` (so importing
    the same SillyTavern chat again, from any device, never makes a second chat). Answers (chat, created)."""
    chat = None
    if chat_id is not None:
        chat = chat_get(user=user, chat_id=chat_id)
    elif client_key is not None:
        client_key_lock(user=user, client_key=client_key)
        chat = Chat.objects.filter(user=user, client_key=client_key).first()
    if chat is None:
        if integrity is not None:
            raise ApplicationError(
                "If-Match names a chat to update, but the import makes a new one.", {"field": "If-Match"}
            )
        new = chat_import(
            user=user,
            stream=stream,
            filename=filename,
            title=title,
            character_ids=character_ids,
            client_key=client_key,
        )
        return new, True
    if character_ids:
        chat_characters_set(chat=chat, characters=owned_characters(user=user, character_ids=character_ids))
    return chat_reimport(chat=chat, jsonl=stream, integrity=integrity, title=title, client_key=client_key), False


@transaction.atomic
def chat_revision_restore(*, chat: Chat, revision_id: int, integrity: uuid.UUID) -> Chat:
    """Put a kept revision back; the current contents become a revision in turn, so a restore can be undone."""
    chat = chat_lock(chat=chat, integrity=integrity)
    revision = revision_get(chat=chat, revision_id=revision_id)
    _snapshot(chat, reason=f"restore of revision {revision.pk}")
    with revision_stream(revision=revision) as jsonl:
        return _replace_contents(chat, jsonl, mirror=False)


@dataclass
class Delta:
    chat: Chat
    messages: list[dict[str, Any]]
    from_index: int


def chat_delta(*, chat: Chat, from_index: int, limit: int) -> Delta:
    """Messages from `from_index` on (SillyTavern-shaped), with the chat's state, read from one snapshot."""
    outermost = not transaction.get_connection().in_atomic_block
    with transaction.atomic():
        if outermost:
            repeatable_read()
        chat = Chat.objects.get(pk=chat.pk)
        rows = (
            Message.objects.filter(chat=chat, index__gte=from_index).order_by("index").values(*MESSAGE_COLUMNS)[:limit]
        )
        return Delta(chat=chat, messages=[message_line(row) for row in rows], from_index=from_index)
