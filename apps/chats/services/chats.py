from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection, models, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from apps.chats.jsonl import HEADER_FIELDS, MESSAGE_FIELDS, is_header, iter_objects, join_fields, split_fields
from apps.chats.models import Character, Chat, Message, ReplyOrder
from apps.chats.selectors import NO_NAME
from apps.chats.services.characters import characters_for_names
from apps.chats.services.personas import owned_persona
from apps.chats.signals import chat_written
from apps.common.exceptions import ApplicationError
from apps.common.services import model_update

IMPORT_BATCH = 1000
EXPORT_CHUNK = 500
MAX_IMPORTED_SPEAKERS = 20
MESSAGE_COLUMNS = (*MESSAGE_FIELDS, "other_fields", "absent_fields")
SAMPLE_PATH = Path(__file__).resolve().parent.parent / "samples" / "the-lantern-keeper.jsonl"


class IntegrityConflict(ApplicationError):
    def __init__(self, chat: Chat) -> None:
        super().__init__(
            "The chat was changed by another client since you read it; read it again and re-apply your change.",
            {"current_integrity": str(chat.integrity), "total_messages": chat.message_count},
            status=409,
            code="integrity",
        )


def chat_lock(*, chat: Chat, integrity: uuid.UUID | None = None) -> Chat:
    """Re-read the chat under a row lock: writes to one chat are serialised, so `integrity` and counts stay true.
    Given the integrity the client last saw, a chat changed since answers IntegrityConflict (409): the check and
    the write that follows are one atomic step, as the lock is held until the transaction ends.

    FOR NO KEY UPDATE, not FOR UPDATE: it serialises the chat's writers just the same, but does not wait for
    background work that only inserts rows referring to the chat (memories, jobs: their foreign keys take a key-share
    lock on it for as long as their transaction lasts)."""
    locked = Chat.objects.select_for_update(no_key=True).get(pk=chat.pk)
    if integrity is not None and locked.integrity != integrity:
        raise IntegrityConflict(locked)
    return locked


def chat_touch(*, chat: Chat, fields: Iterable[str] = (), mirror: bool = False) -> Chat:
    """Record a write: a new integrity UUID, plus whichever other fields the caller changed. Once committed, the
    apps above follow (the chat_written signal: the recall index, the extraction pipeline).

    `mirror`: the write made the chat equal to a SillyTavern file (an import, a save, the extension's sync), so an
    export may keep the file's own chat_metadata.integrity (see chat_header)."""
    chat.integrity = uuid.uuid4()
    names = ["integrity", "updated_at", *fields]
    if mirror:
        chat.mirrored_integrity = chat.integrity
        names.append("mirrored_integrity")
    # One statement, as save(update_fields=…) writes them, and the count of writes added to in the database (not
    # from this instance's number: one read before another writer's change must not make the count go back), its
    # new value returned.
    columns = [Chat._meta.get_field(name) for name in dict.fromkeys(names) if name != "writes"]
    values = [column.get_db_prep_save(column.pre_save(chat, False), connection) for column in columns]
    assignments = ", ".join(f"{connection.ops.quote_name(column.column)} = %s" for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Chat._meta.db_table} SET {assignments}, writes = writes + 1 WHERE id = %s RETURNING writes",
            [*values, chat.pk],
        )
        row = cursor.fetchone()
    if row is None:  # as save(update_fields=…) would not write a row that is gone
        raise Chat.DoesNotExist(f"Chat {chat.pk} is gone.")
    chat.writes = row[0]
    chat_written.send(sender=Chat, chat_id=chat.pk)
    return chat


def owned_characters(*, user: AbstractUser, character_ids: Iterable[int]) -> list[Character]:
    ids = list(dict.fromkeys(character_ids))
    found = {c.pk: c for c in Character.objects.filter(user=user, pk__in=ids)}
    missing = [pk for pk in ids if pk not in found]
    if missing:
        raise ApplicationError("Unknown character id(s).", {"field": "character_ids", "ids": missing})
    return [found[pk] for pk in ids]


def chat_characters_set(*, chat: Chat, characters: list[Character]) -> None:
    """Link the chat's characters in the order given, replacing any it had: the chat's character order (a group's
    greetings, its turns) is the order of the links (apps/chats/selectors.py chat_characters_in_order). `set()`
    would keep the old links and add new ones in no particular order."""
    through = Chat.characters.through
    through.objects.filter(chat=chat).delete()
    through.objects.bulk_create([through(chat=chat, character=character) for character in characters])


def reply_order_check(reply_order: str) -> None:
    if reply_order not in ReplyOrder.values:
        raise ApplicationError(f"`reply_order` is one of {', '.join(ReplyOrder.values)}.", {"field": "reply_order"})


@transaction.atomic
def chat_create(
    *,
    user: AbstractUser,
    title: str,
    character_ids: Iterable[int] = (),
    user_name: str = "",
    character_name: str = "",
    chat_metadata: dict[str, Any] | None = None,
    client_key: str | None = None,
    persona_id: int | None = None,
    reply_order: str = ReplyOrder.NATURAL,
    create_date: Any = None,
) -> Chat:
    characters = owned_characters(user=user, character_ids=character_ids)
    persona = owned_persona(user=user, persona_id=persona_id) if persona_id is not None else None
    reply_order_check(reply_order)
    if client_key is not None:
        client_key_lock(user=user, client_key=client_key)
        client_key_check(user=user, client_key=client_key)
    chat = Chat.objects.create(
        user=user,
        title=title,
        user_name=user_name or user.get_username(),
        character_name=character_name or ", ".join(c.name for c in characters),
        create_date=create_date if create_date is not None else timezone.now().isoformat(),
        chat_metadata=chat_metadata or {},
        client_key=client_key,
        persona=persona,
        reply_order=reply_order,
    )
    chat_characters_set(chat=chat, characters=characters)
    return chat


@transaction.atomic
def chat_update(*, chat: Chat, data: dict[str, Any], integrity: uuid.UUID | None = None, mirror: bool = False) -> Chat:
    """Change title, participants, persona (an id of the user's, or None), reply order, client key or header fields;
    `chat_metadata`, when given, replaces the stored object."""
    chat = chat_lock(chat=chat, integrity=integrity)
    if "client_key" in data:
        client_key_check(user=chat.user, client_key=data["client_key"], chat=chat)
    changed = []
    if "persona" in data:
        chat.persona = owned_persona(user=chat.user, persona_id=data["persona"]) if data["persona"] else None
        changed.append("persona")
    if "reply_order" in data:
        reply_order_check(data["reply_order"])
        chat.reply_order = data["reply_order"]
        changed.append("reply_order")
    for key in ("title", "user_name", "character_name", "chat_metadata", "client_key"):
        if key in data:
            setattr(chat, key, data[key])
            changed.append(key)
            if key in HEADER_FIELDS:
                chat.has_header = True  # a headerless (old group) chat given header fields exports with a header
                chat.header_other_fields.pop(key, None)
                if key in chat.header_absent_fields:
                    chat.header_absent_fields.remove(key)
    if "character_ids" in data:
        chat_characters_set(
            chat=chat, characters=owned_characters(user=chat.user, character_ids=data["character_ids"])
        )
    return chat_touch(
        chat=chat, fields=[*changed, "has_header", "header_other_fields", "header_absent_fields"], mirror=mirror
    )


def client_key_check(*, user: AbstractUser, client_key: str | None, chat: Chat | None = None) -> None:
    """A client key names one chat per account: another chat of the account holding it answers 409."""
    if client_key is None:
        return
    taken = Chat.objects.filter(user=user, client_key=client_key)
    if chat is not None:
        taken = taken.exclude(pk=chat.pk)
    holder = taken.values_list("pk", flat=True).first()
    if holder is not None:
        raise ApplicationError(
            "Another chat of yours already has this client key.",
            {"field": "client_key", "chat": holder},
            status=409,
            code="client_key_taken",
        )


def client_key_lock(*, user: AbstractUser, client_key: str) -> None:
    """Serialise the writers of one client key until the transaction ends (a transaction-level advisory lock): two
    devices importing the same SillyTavern chat at once make one Lorekeeper chat, the second updating it."""
    with connection.cursor() as cursor:
        key = f"chat-client-key:{user.pk}:{client_key}"
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])


@transaction.atomic
def chat_delete(*, chat: Chat) -> None:
    """Locked first (FOR UPDATE): background work still writing rows that refer to the chat (its recall index)
    commits before the deletion gathers them, or fails its foreign key after it, instead of failing the deletion."""
    chat = Chat.objects.select_for_update().filter(pk=chat.pk).first()
    if chat is not None:
        chat.delete()


@transaction.atomic
def chat_import(
    *,
    user: AbstractUser,
    stream: BinaryIO,
    filename: str = "",
    title: str = "",
    character_ids: Iterable[int] = (),
    client_key: str | None = None,
) -> Chat:
    """Import a SillyTavern JSONL chat, streaming: the file is read a chunk at a time and messages are inserted in
    batches, so memory does not grow with the file. All or nothing: a bad line raises ImportLineError (400, naming
    the line) and the transaction leaves no trace. `client_key`: the new chat's (callers updating the chat that
    already holds the key use chat_reimport)."""
    characters = owned_characters(user=user, character_ids=character_ids)
    if client_key is not None:
        client_key_check(user=user, client_key=client_key)
    chat = Chat.objects.create(user=user, title=title or "Imported chat", client_key=client_key)
    speakers = chat_load_jsonl(chat=chat, stream=stream)
    if not characters:
        names = [chat.character_name] if chat.character_name not in NO_NAME else speakers
        characters = characters_for_names(user=user, names=names)
    chat_characters_set(chat=chat, characters=list(characters))
    if not title:
        chat.title = (Path(filename).stem if filename else "") or chat.character_name or "Imported chat"
    chat.title = chat.title[:300]
    chat.integrity = uuid.uuid4()
    chat.mirrored_integrity = chat.integrity
    chat.writes = 1  # a new chat: no one else has written it
    chat.save()
    chat_written.send(sender=Chat, chat_id=chat.pk)
    return chat


def chat_load_jsonl(*, chat: Chat, stream: BinaryIO) -> list[str]:
    """Fill a chat that has no messages from SillyTavern JSONL: its header (if the file has one) and messages.
    Sets the header fields and `message_count` on `chat` without saving it; answers the names of the first
    speakers that are neither the user nor the system (for linking characters to a headerless group chat)."""
    batch: list[dict[str, Any]] = []
    speakers: dict[str, None] = {}
    index = 0
    first = True
    chat.has_header = True
    for _line_no, obj in iter_objects(stream, max_bytes=settings.LOREKEEPER_MAX_IMPORT_BYTES):
        if first:
            first = False
            if is_header(obj):
                columns, other, absent = split_fields(obj, HEADER_FIELDS)
                for key, value in columns.items():
                    setattr(chat, key, value)
                chat.header_other_fields, chat.header_absent_fields = other, absent
                continue
            chat.has_header = False
        row = message_row(index=index, line=obj)
        batch.append(row)
        index += 1
        if row["name"] and not row["is_user"] and not row["is_system"] and len(speakers) < MAX_IMPORTED_SPEAKERS:
            speakers[row["name"]] = None
        if len(batch) >= IMPORT_BATCH:
            message_rows_insert(chat_id=chat.pk, rows=batch)
            batch = []
    if first:
        raise ApplicationError("The file is empty: a SillyTavern chat has at least one line.", {"field": "file"})
    message_rows_insert(chat_id=chat.pk, rows=batch)
    chat.message_count = index
    return list(speakers)


def message_lines_append(*, chat: Chat, lines: list[dict[str, Any]], mirror: bool = False) -> Chat:
    """Put SillyTavern message objects at the end of a chat locked by chat_lock, and record the write: the one way
    messages are appended (the sync append and the message API both come here)."""
    rows = [message_row(index=chat.message_count + i, line=line) for i, line in enumerate(lines)]
    message_rows_insert(chat_id=chat.pk, rows=rows)
    chat.message_count += len(rows)
    return chat_touch(chat=chat, fields=["message_count"], mirror=mirror)


def message_row(*, index: int, line: dict[str, Any]) -> dict[str, Any]:
    """A message's columns from its SillyTavern object, for message_rows_insert."""
    columns, other, absent = split_fields(line, MESSAGE_FIELDS)
    return {"index": index, **columns, "other_fields": other, "absent_fields": absent}


def message_rows_insert(*, chat_id: int, rows: list[dict[str, Any]]) -> None:
    """Insert message rows (from message_row) with COPY: about twice as fast as INSERT, and the SQL is not kept in
    Django's DEBUG query log (which would otherwise hold a copy of a whole imported file in memory under `make run`).
    """
    if not rows:
        return
    fields = ["index", *MESSAGE_FIELDS, "other_fields", "absent_fields"]
    json_fields = {f for f in fields if isinstance(Message._meta.get_field(f), models.JSONField)}
    columns = ", ".join(f'"{Message._meta.get_field(name).column}"' for name in ["chat", *fields])
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f'COPY "{Message._meta.db_table}" ({columns}) FROM STDIN') as copy:
            for row in rows:
                # None stays SQL NULL, as Django's JSONField(null=True) stores it.
                copy.write_row(
                    [chat_id] + [Jsonb(row[f]) if f in json_fields and row[f] is not None else row[f] for f in fields]
                )


@transaction.atomic
def chat_import_sample(*, user: AbstractUser) -> Chat:
    """The bundled sample story, with its character card, to see everything working on a new account."""
    with SAMPLE_PATH.open("rb") as stream:
        chat = chat_import(user=user, stream=stream, title="The Lantern Keeper (sample story)")
    card = json.loads(SAMPLE_PATH.with_suffix(".card.json").read_text())
    for character in chat.characters.all():
        if character.name == card["name"] and not character.description:
            model_update(instance=character, fields=list(card), data=card)
    return chat


# Fresh SillyTavern integrity slugs for exports are derived from the chat's state, so exporting an unchanged chat
# twice gives the same file.
EXPORT_SLUG_NAMESPACE = uuid.UUID("6f1d3c52-5b0e-4a8e-9b7c-2f4f1f0b7a11")


def export_slug(*, chat: Chat) -> str | None:
    """The chat_metadata.integrity an export carries, or None to keep the stored one. SillyTavern silently
    overwrites a chat file replaced under an open tab when the slugs match: a chat Lorekeeper changed since it was
    last equal to a SillyTavern file (chat.mirrored_integrity) gets a fresh slug, so SillyTavern refuses the stale
    tab's save instead of losing the newer chat."""
    if chat.mirrored_integrity is not None and chat.mirrored_integrity == chat.integrity:
        return None
    return str(uuid.uuid5(EXPORT_SLUG_NAMESPACE, f"{chat.uid}:{chat.integrity}"))


def chat_header(*, chat: Chat, for_export: bool = False) -> dict[str, Any]:
    """The header line. `for_export`: as a file for SillyTavern, with a fresh integrity slug when due."""
    columns = {key: getattr(chat, key) for key in HEADER_FIELDS}
    slug = export_slug(chat=chat) if for_export else None
    if slug and isinstance(columns.get("chat_metadata"), dict) and "chat_metadata" not in chat.header_absent_fields:
        columns["chat_metadata"] = {**columns["chat_metadata"], "integrity": slug}
    return join_fields(columns, chat.header_other_fields, chat.header_absent_fields, HEADER_FIELDS)


def message_line(row: dict[str, Any]) -> dict[str, Any]:
    """The SillyTavern JSON object of a stored message (a `.values(*MESSAGE_COLUMNS)` row or a model's fields)."""
    return join_fields(row, row["other_fields"], row["absent_fields"], MESSAGE_FIELDS)


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def chat_export_lines(*, chat: Chat, for_sillytavern: bool = False) -> Iterator[bytes]:
    """The chat as SillyTavern JSONL, a chunk of messages at a time (lines joined by newlines, as SillyTavern
    writes them). Headerless group files export without a header. `for_sillytavern`: a file to hand to
    SillyTavern, whose integrity slug is fresh when Lorekeeper changed the chat (export_slug); archives and
    revisions keep the stored header exactly.

    The whole export reads one snapshot (a REPEATABLE READ transaction), so a write landing while a large chat
    streams out cannot shift indices under it and skip or repeat messages."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            repeatable_read()
        chat = Chat.objects.get(pk=chat.pk)
        separator = b""
        if chat.has_header:
            yield _dumps(chat_header(chat=chat, for_export=for_sillytavern))
            separator = b"\n"
        last = -1
        while True:
            rows = list(
                Message.objects.filter(chat_id=chat.pk, index__gt=last)
                .order_by("index")
                .values("index", *MESSAGE_COLUMNS)[:EXPORT_CHUNK]
            )
            if not rows:
                return
            parts = []
            for row in rows:
                parts.append(separator + _dumps(message_line(row)))
                separator = b"\n"
            yield b"".join(parts)
            last = rows[-1]["index"]


def repeatable_read() -> None:
    """Make the transaction just opened a snapshot; inside an outer transaction (tests) that one is used as is."""
    with connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
