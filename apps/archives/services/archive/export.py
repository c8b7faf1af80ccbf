"""Writing an account's archive (the members listed in apps/archives/services/archive/__init__.py), from one snapshot
of the database."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from datetime import datetime
from typing import Any, BinaryIO

from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from apps.accounts.services import settings_document_get
from apps.archives.services.archive.decisions import decisions_write
from apps.archives.services.archive.format import BATCH, FORMAT, VERSION, Progress, quiet
from apps.chats.models import Character, Chat
from apps.chats.services.avatars import avatar_bytes
from apps.chats.services.characters import CHARACTER_FIELDS
from apps.chats.services.chats import chat_export_lines, repeatable_read
from apps.lorebooks.models import Lorebook
from apps.memories.models import Entity, Kind, Memory
from apps.sync.models import FeedEntry
from apps.sync.services.feed import MEMORY_FIELDS as FEED_MEMORY_FIELDS

# What a memory line holds besides its uid, clock and references (its creation time is written apart).
MEMORY_FIELDS = (*(name for name in FEED_MEMORY_FIELDS if name != "created_at"), "source_message_indices")


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _memory_lines(user: AbstractUser) -> Iterator[bytes]:
    character_uids = dict(Character.objects.filter(user=user).values_list("id", "uid"))
    chat_uids = dict(Chat.objects.filter(user=user).values_list("id", "uid"))
    uids = dict(Memory.objects.filter(user=user).exclude(kind=Kind.MESSAGE).values_list("id", "uid"))
    last = 0
    while True:
        rows = list(
            Memory.objects.filter(user=user, id__gt=last)
            .exclude(kind=Kind.MESSAGE)
            .order_by("id")
            .values(
                "id",
                "uid",
                "clock",
                "changed_at",
                "changed_by",
                "character_id",
                "chat_id",
                "superseded_by_id",
                "created_at",
                *MEMORY_FIELDS,
            )[:BATCH]
        )
        if not rows:
            return
        ids = [row["id"] for row in rows]
        contradicts: dict[int, list[str]] = {}
        for a, b in Memory.contradicts.through.objects.filter(from_memory_id__in=ids).values_list(
            "from_memory_id", "to_memory_id"
        ):
            if b in uids:
                contradicts.setdefault(a, []).append(str(uids[b]))
        entities: dict[int, list[dict]] = {}
        for memory_id, name, kind in Memory.entities.through.objects.filter(memory_id__in=ids).values_list(
            "memory_id", "entity__name", "entity__type"
        ):
            entities.setdefault(memory_id, []).append({"name": name, "type": kind})
        for row in rows:
            out = {field: row[field] for field in MEMORY_FIELDS}
            out |= {
                "uid": str(row["uid"]),
                "clock": row["clock"],
                "changed_at": _iso(row["changed_at"]),
                "changed_by": row["changed_by"],
                "created_at": _iso(row["created_at"]),
                "occurred_at": _iso(row["occurred_at"]),
                "character": str(character_uids[row["character_id"]]) if row["character_id"] else None,
                "chat": str(chat_uids[row["chat_id"]]) if row["chat_id"] else None,
                "superseded_by": str(uids[row["superseded_by_id"]]) if row["superseded_by_id"] in uids else None,
                "contradicts": sorted(contradicts.get(row["id"], [])),
                "entities": entities.get(row["id"], []),
            }
            yield _line(out)
        last = rows[-1]["id"]


def _avatar_write(archive: zipfile.ZipFile, character: Character) -> str | None:
    """The character's avatar as the member avatars/<uid>.<suffix> (stored: a picture does not compress), and that
    member's name; None when it has none, or its file is gone."""
    data = avatar_bytes(character)
    if data is None:
        return None
    name = f"avatars/{character.uid}.{character.avatar.name.rsplit('.', 1)[-1].lower()}"
    archive.writestr(name, data, compress_type=zipfile.ZIP_STORED)
    return name


def _characters_write(archive: zipfile.ZipFile, characters: list[Character]) -> None:
    # The pictures first: a zip takes no other member while one is open for writing.
    avatars = {character.pk: _avatar_write(archive, character) for character in characters}
    with archive.open("characters.jsonl", "w") as out:
        for character in characters:
            fields = {name: getattr(character, name) for name in CHARACTER_FIELDS}
            fields["avatar"] = avatars[character.pk]
            out.write(
                _line(
                    {
                        "uid": str(character.uid),
                        "clock": character.clock,
                        "changed_at": _iso(character.changed_at),
                        "changed_by": character.changed_by,
                        "source_instance": character.source_instance,
                        "participating_instances": character.participating_instances,
                        **fields,
                    }
                )
            )


def _chats_write(archive: zipfile.ZipFile, chats: list[Chat], uid_of: dict[int, str], progress: Progress) -> None:
    """chats.jsonl, then each chat's own file as the chat export writes it."""
    with archive.open("chats.jsonl", "w") as out:
        for chat in chats:
            out.write(
                _line(
                    {
                        "uid": str(chat.uid),
                        "title": chat.title,
                        "integrity": str(chat.integrity),
                        "characters": [uid_of[c.pk] for c in chat.characters.all()],
                        "messages": chat.message_count,
                        "file": f"chats/{chat.uid}.jsonl",
                        "created_at": _iso(chat.created_at),
                    }
                )
            )
    for number, chat in enumerate(chats):
        progress(f"chat {number + 1} of {len(chats)}", 10 + int(50 * number / max(len(chats), 1)))
        with archive.open(f"chats/{chat.uid}.jsonl", "w") as out:
            for part in chat_export_lines(chat=chat):
                out.write(part)


def _entities_write(archive: zipfile.ZipFile, user: AbstractUser, uid_of: dict[int, str]) -> None:
    entities = Entity.objects.filter(user=user).order_by("id").values("name", "type", "aliases", "character_id")
    with archive.open("entities.jsonl", "w") as out:
        for entity in entities:
            character = uid_of.get(entity.pop("character_id"))
            out.write(_line({**entity, "character": character}))


def _memories_write(archive: zipfile.ZipFile, user: AbstractUser) -> int:
    written = 0
    with archive.open("memories.jsonl", "w") as out:
        for line in _memory_lines(user):
            out.write(line)
            written += 1
    return written


def _settings_write(archive: zipfile.ZipFile, user: AbstractUser) -> None:
    document = settings_document_get(user=user)
    archive.writestr(
        "settings.json",
        json.dumps(
            {
                "document": document.data,
                "clock": document.clock,
                "changed_at": _iso(document.changed_at),
                "changed_by": document.changed_by,
            },
            ensure_ascii=False,
        ),
    )


def _lorebooks_write(archive: zipfile.ZipFile, user: AbstractUser) -> int:
    """lorebooks.jsonl, a line per book, then each book's entries in its own file, one per line (an entry as
    SillyTavern writes it, apps/lorebooks/)."""
    books = list(Lorebook.objects.filter(user=user).annotate(entry_count=Count("entries")).order_by("id"))
    with archive.open("lorebooks.jsonl", "w") as out:
        for book in books:
            out.write(
                _line(
                    {
                        "uid": str(book.uid),
                        "name": book.name,
                        "scope": book.scope,
                        "extra": book.extra,
                        "clock": book.clock,
                        "changed_at": _iso(book.changed_at),
                        "changed_by": book.changed_by,
                        "source_instance": book.source_instance,
                        "participating_instances": book.participating_instances,
                        "created_at": _iso(book.created_at),
                        "updated_at": _iso(book.updated_at),
                        "entries": book.entry_count,
                        "file": f"lorebooks/{book.uid}.jsonl",
                    }
                )
            )
    for book in books:
        with archive.open(f"lorebooks/{book.uid}.jsonl", "w") as out:
            for data in book.entries.order_by("uid").values_list("data", flat=True).iterator(chunk_size=BATCH):
                out.write(_line(data))
    return len(books)


def _tombstones_write(archive: zipfile.ZipFile, user: AbstractUser) -> int:
    tombstones = FeedEntry.objects.filter(user=user, deleted_at__isnull=False).order_by("id")
    written = 0
    with archive.open("tombstones.jsonl", "w") as out:
        for entry in tombstones:
            out.write(
                _line(
                    {
                        "type": entry.type,
                        "uid": str(entry.uid),
                        "clock": entry.clock,
                        "deleted_at": _iso(entry.deleted_at),
                        "deleted_by": entry.deleted_by,
                    }
                )
            )
            written += 1
    return written


def archive_write(*, user: AbstractUser, target: BinaryIO, progress: Progress = quiet) -> dict[str, int]:
    """Write the account's archive into `target` (a zip), from one snapshot of the database. Returns counts."""
    counts: dict[str, int] = {}
    outermost = not connection.in_atomic_block
    with transaction.atomic(), zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        if outermost:
            repeatable_read()
        progress("characters", 5)
        characters = list(Character.objects.filter(user=user).order_by("id"))
        _characters_write(archive, characters)
        counts["characters"] = len(characters)
        uid_of = {c.pk: str(c.uid) for c in characters}
        chats = list(Chat.objects.filter(user=user).order_by("id").prefetch_related("characters"))
        _chats_write(archive, chats, uid_of, progress)
        counts["chats"] = len(chats)
        counts["messages"] = sum(chat.message_count for chat in chats)
        progress("entities", 60)
        _entities_write(archive, user, uid_of)
        progress("memories", 65)
        counts["memories"] = _memories_write(archive, user)
        counts["decisions"] = decisions_write(archive, user)
        progress("lorebooks", 90)
        counts["lorebooks"] = _lorebooks_write(archive, user)
        progress("settings", 95)
        _settings_write(archive, user)
        counts["tombstones"] = _tombstones_write(archive, user)
        manifest = {"format": FORMAT, "version": VERSION, "created_at": timezone.now().isoformat(), "counts": counts}
        archive.writestr("manifest.json", json.dumps(manifest, indent=2))
    progress("done", 100)
    return counts
