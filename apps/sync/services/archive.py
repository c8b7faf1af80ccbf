"""Account archives: a zip of everything an account holds, and its import into an empty or existing account.

    manifest.json      {"format": "lorekeeper-archive", "version": 1, "created_at", "counts"}
    characters.jsonl   one character per line: its uid, clock and card fields
    chats.jsonl        one chat per line: uid, title, the characters' uids, integrity, file
    chats/<uid>.jsonl  the chat as SillyTavern JSONL (header line first), as the chat export writes it
    entities.jsonl     the entity registry (name, type, aliases, the character's uid or none)
    memories.jsonl     one memory per line, message memories left out (they are made again from the chats),
                       with its chain by uid: superseded_by, contradicts; vectors left out (embedded again)
    settings.json      the settings document with its clock
    tombstones.jsonl   what was deleted (type, uid, clock), so a merge does not bring it back

An import merges by the sync rules (apps/sync/services/push.py): an object under a uid already here is replaced
when the archive's version descends from it, kept when it descends from the archive's, and a conflict goes to the
later write (then instance priority); tombstones hold. A restore is the same merge that also brings back what was
deleted since (tombstoned objects come back). A chat already here under the archive's uid is kept when its
integrity differs, the archive's version saved beside it as a revision that can be restored (a restore does the
opposite: the archive's version comes back, the current one saved as a revision). Nothing is ever lost.
All of it in one transaction: an archive with a bad line changes nothing, and the error names the file and line.
Every line is checked with the API's serializers before it is stored (apps/sync/archive_records.py), and every
member is streamed, its bytes counted as they are unpacked (apps/sync/services/archive_zip.py).
"""

from __future__ import annotations

import gzip
import io
import json
import uuid
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, BinaryIO, NamedTuple

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction
from django.utils import timezone

from apps.chats.jsonl import ImportLineError, is_header, iter_objects
from apps.chats.models import Character, Chat
from apps.chats.services.characters import CHARACTER_FIELDS
from apps.chats.services.chats import chat_export_lines, chat_import, repeatable_read
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import text_hash
from apps.memories.models import Entity, Kind, Memory, Status
from apps.memories.services.memories import CHAT_ONLY_KINDS, embed_later
from apps.sync import clocks
from apps.sync.archive_records import (
    CharacterRecordSerializer,
    ChatRecordSerializer,
    EntityRecordSerializer,
    MemoryRecordSerializer,
    SettingsRecordSerializer,
    TombstoneRecordSerializer,
    record_check,
)
from apps.sync.clocks import Order
from apps.sync.models import ChatRevision, FeedEntry, FeedType, Instance, SettingsDocument
from apps.sync.services.archive_zip import FORMAT, VERSION, ArchiveError, ArchiveMember, ArchiveReader
from apps.sync.services.chats import _replace_contents, _snapshot
from apps.sync.services.daily import daily_merge
from apps.sync.services.feed import MEMORY_FIELDS as FEED_MEMORY_FIELDS
from apps.sync.services.feed import feed_revive
from apps.sync.services.settings import settings_get

__all__ = ["ArchiveError", "archive_import", "archive_write"]

ARCHIVE_NAMESPACE = uuid.UUID("5f0c6e3a-8a4e-4f3b-9a57-6b1f2d0c7e11")
BATCH = 1000
# What a memory line holds besides its uid, clock and references (its creation time is written apart).
MEMORY_FIELDS = (*(name for name in FEED_MEMORY_FIELDS if name != "created_at"), "source_message_indices")
Progress = Callable[[str, int], None]


class _Link(NamedTuple):
    """What a memory line says of other rows (its chain, contradictions, entities), kept until all are in."""

    uid: uuid.UUID
    superseded_by: uuid.UUID | None
    contradicts: tuple[uuid.UUID, ...]
    character: int | None
    entities: tuple[str, ...]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode() + b"\n"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _quiet(stage: str, percent: int) -> None:
    pass


# --- writing ----------------------------------------------------------------------------------------------------


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


def archive_write(*, user: AbstractUser, target: BinaryIO, progress: Progress = _quiet) -> dict[str, int]:
    """Write the account's archive into `target` (a zip), from one snapshot of the database. Returns counts."""
    counts: dict[str, int] = {}
    outermost = not connection.in_atomic_block
    with transaction.atomic(), zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        if outermost:
            repeatable_read()
        progress("characters", 5)
        characters = list(Character.objects.filter(user=user).order_by("id"))
        with archive.open("characters.jsonl", "w") as out:
            for character in characters:
                fields = {name: getattr(character, name) for name in CHARACTER_FIELDS}
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
        counts["characters"] = len(characters)
        uid_of = {c.pk: str(c.uid) for c in characters}
        chats = list(Chat.objects.filter(user=user).order_by("id").prefetch_related("characters"))
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
        counts["chats"] = len(chats)
        counts["messages"] = sum(chat.message_count for chat in chats)
        progress("entities", 60)
        entities = Entity.objects.filter(user=user).order_by("id").values("name", "type", "aliases", "character_id")
        with archive.open("entities.jsonl", "w") as out:
            for entity in entities:
                character = uid_of.get(entity.pop("character_id"))
                out.write(_line({**entity, "character": character}))
        progress("memories", 65)
        counts["memories"] = 0
        with archive.open("memories.jsonl", "w") as out:
            for line in _memory_lines(user):
                out.write(line)
                counts["memories"] += 1
        progress("settings", 95)
        document = settings_get(user=user)
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
        tombstones = FeedEntry.objects.filter(user=user, deleted_at__isnull=False).order_by("id")
        counts["tombstones"] = 0
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
                counts["tombstones"] += 1
        manifest = {"format": FORMAT, "version": VERSION, "created_at": timezone.now().isoformat(), "counts": counts}
        archive.writestr("manifest.json", json.dumps(manifest, indent=2))
    progress("done", 100)
    return counts


# --- importing --------------------------------------------------------------------------------------------------


def _uuid(value: Any, *, file: str, line: int, field: str = "uid") -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError) as exc:
        raise ArchiveError(f"{field} is not a uuid", file=file, line=line) from exc


class _Tee:
    """A chat file read by the line reader while its bytes go, as they come, into the revision's gzip."""

    def __init__(self, member: ArchiveMember, out: gzip.GzipFile) -> None:
        self.member, self.out = member, out

    def read(self, size: int) -> bytes:
        data = self.member.read(size)
        self.out.write(data)
        return data


def _revision_of(member: ArchiveMember) -> tuple[bytes, int]:
    """A chat file kept as a revision: gzipped a chunk at a time, every line checked as a chat import checks it.
    Answers the gzip and its number of messages."""
    buffer = io.BytesIO()
    messages, first = 0, True
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6) as out:
        for _number, obj in iter_objects(_Tee(member, out), max_bytes=settings.LOREKEEPER_MAX_IMPORT_BYTES):
            if not (first and is_header(obj)):
                messages += 1
            first = False
    if first:
        raise ArchiveError("the chat file is empty: a SillyTavern chat has at least one line", file=member.name)
    return buffer.getvalue(), messages


class _Import:
    def __init__(self, user: AbstractUser, archive: ArchiveReader, restore: bool, progress: Progress) -> None:
        self.user = user
        self.archive = archive
        self.restore = restore
        self.progress = progress
        self.priorities = dict(Instance.objects.filter(user=user).values_list("key", "priority"))
        self.tombstoned = {
            (kind, uid)
            for kind, uid in FeedEntry.objects.filter(user=user, deleted_at__isnull=False).values_list("type", "uid")
        }
        self.characters: dict[str, int] = {}  # archive uid → character id here
        self.chats: dict[str, int] = {}  # archive uid → chat id here
        self.uids: dict[uuid.UUID, uuid.UUID] = {}  # a memory's archive uid → its uid here
        self.counts: dict[str, dict[str, int]] = {}
        self.embed = False

    def count(self, kind: str, what: str) -> None:
        self.counts.setdefault(kind, {}).setdefault(what, 0)
        self.counts[kind][what] += 1

    def expected(self, kind: str) -> int:
        """How many of `kind` the manifest announces (for progress only: the lines are what counts)."""
        counts = self.archive.manifest.get("counts")
        value = counts.get(kind) if isinstance(counts, dict) else None
        return value if isinstance(value, int) and value > 0 else 0

    def local(self, model, uid: uuid.UUID) -> uuid.UUID:
        """The uid an archived object has here: its own, unless another account holds that one (an archive of
        another account on this server); then one derived from it and this account, the same at every import,
        so importing the same archive again finds what the first import made."""
        taken = (
            model.objects.filter(uid=uid).exclude(user=self.user).exists()
            or FeedEntry.objects.filter(uid=uid).exclude(user=self.user).exists()
        )
        return uuid.uuid5(ARCHIVE_NAMESPACE, f"{self.user.pk}:{uid}") if taken else uid

    def winner(self, clock: dict, changed_at: datetime | None, by: str, stored) -> tuple[str, dict]:
        """("archive" | "stored" | "same", the clock to keep)."""
        order = clocks.compare(clock, stored.clock)
        if order is Order.EQUAL:
            return "same", stored.clock
        if order is Order.AFTER:
            return "archive", clock
        if order is Order.BEFORE:
            return "stored", stored.clock

        def key(moment: datetime | None, name: str) -> tuple:
            name = name or clocks.SERVER
            return (int(moment.timestamp()) if moment else 0, self.priorities.get(name, 0), name)

        merged = clocks.merge(clock, stored.clock)
        return ("archive" if key(changed_at, by) > key(stored.changed_at, stored.changed_by) else "stored"), merged

    # characters

    def characters_in(self) -> None:
        name = "characters.jsonl"
        for number, row in self.archive.lines(name):
            archived = _uuid(row.get("uid"), file=name, line=number)
            record = record_check(CharacterRecordSerializer, row, file=name, line=number)
            uid = self.local(Character, archived)
            fields = {field: record[field] for field in CHARACTER_FIELDS if field in record}
            stored = Character.objects.filter(user=self.user, uid=uid).first()
            if stored is None:
                if (FeedType.CHARACTER, uid) in self.tombstoned and not self.restore:
                    self.count("characters", "deleted here")
                    continue
                character = Character.objects.create(
                    user=self.user,
                    uid=uid,
                    clock=record["clock"],
                    changed_at=record["changed_at"],
                    changed_by=record["changed_by"],
                    source_instance=record["source_instance"],
                    participating_instances=record["participating_instances"],
                    **fields,
                )
                if (FeedType.CHARACTER, uid) in self.tombstoned:
                    feed_revive(user_id=self.user.pk, kind=FeedType.CHARACTER, uid=uid)
                    self.count("characters", "revived")
                else:
                    self.count("characters", "created")
                self.characters[str(archived)] = character.pk
                continue
            self.characters[str(archived)] = stored.pk
            side, kept_clock = self.winner(record["clock"], record["changed_at"], record["changed_by"], stored)
            if side == "archive":
                for field, value in fields.items():
                    setattr(stored, field, value)
                stored.clock, stored.changed_at, stored.changed_by = (
                    kept_clock,
                    record["changed_at"],
                    record["changed_by"],
                )
                stored.save()
                self.count("characters", "updated")
            else:
                if kept_clock != stored.clock:
                    Character.objects.filter(pk=stored.pk).update(clock=kept_clock)
                self.count("characters", "kept")

    # chats

    @contextmanager
    def chat_file(self, path: str) -> Iterator[ArchiveMember]:
        """A chat file of the archive, streamed; what the chat import refuses in it is refused naming the file."""
        member = self.archive.member(path)
        try:
            with member:
                yield member
        except ArchiveError:
            raise
        except ImportLineError as exc:
            raise ArchiveError(exc.extra["problem"], file=path, line=exc.extra["line"]) from exc
        except ApplicationError as exc:
            raise ArchiveError(exc.message, file=path) from exc

    def chats_in(self) -> None:
        name = "chats.jsonl"
        total = self.expected("chats")
        for position, (number, row) in enumerate(self.archive.lines(name)):
            of = f" of {total}" if total else ""
            self.progress(f"chat {position + 1}{of}", 10 + int(40 * min(position / max(total, 1), 1)))
            archived = _uuid(row.get("uid"), file=name, line=number)
            record = record_check(ChatRecordSerializer, row, file=name, line=number)
            uid = self.local(Chat, archived)
            path = record.get("file") or f"chats/{archived}.jsonl"
            if path not in self.archive.names:
                raise ArchiveError(f"the chat's file {path!r} is not in the archive", file=name, line=number)
            characters = [self.characters[str(c)] for c in record["characters"] if str(c) in self.characters]
            stored = Chat.objects.filter(user=self.user, uid=uid).first()
            if stored is None:
                with self.chat_file(path) as member:
                    chat = chat_import(
                        user=self.user,
                        stream=member,
                        filename=path,
                        title=record.get("title") or "",
                        character_ids=characters,
                    )
                same = {"uid": uid}
                if record.get("integrity"):  # the same version as archived
                    same["integrity"] = record["integrity"]
                Chat.objects.filter(pk=chat.pk).update(**same)
                self.chats[str(archived)] = chat.pk
                self.count("chats", "created")
                continue
            self.chats[str(archived)] = stored.pk
            if str(stored.integrity) == str(record.get("integrity")):
                self.count("chats", "same")
                continue
            if self.restore:
                _snapshot(stored, reason="before restoring a backup")
                with self.chat_file(path) as member:
                    _replace_contents(stored, member)
                self.count("chats", "restored")
            else:
                integrity = _uuid(record.get("integrity"), file=name, line=number, field="integrity")
                with self.chat_file(path) as member:
                    jsonl_gzip, messages = _revision_of(member)
                ChatRevision.objects.create(
                    chat=stored,
                    reason="imported archive (kept beside the current chat)",
                    integrity=integrity,
                    message_count=messages,
                    jsonl_gzip=jsonl_gzip,
                )
                self.count("chats", "kept, archive's version saved as a revision")

    # entities and memories

    def entities_in(self) -> None:
        name = "entities.jsonl"
        known = {
            (e.character_id, e.name.lower())
            for e in Entity.objects.filter(user=self.user).only("character_id", "name")
        }
        fresh = []
        for number, row in self.archive.lines(name):
            record = record_check(EntityRecordSerializer, row, file=name, line=number)
            label = record["name"]
            character = self.characters.get(str(record["character"])) if record.get("character") else None
            if (character, label.lower()) in known:
                continue
            known.add((character, label.lower()))
            fresh.append(
                Entity(
                    user=self.user,
                    character_id=character,
                    name=label,
                    type=record.get("type", ""),
                    aliases=record["aliases"],
                )
            )
            if len(fresh) >= BATCH:
                Entity.objects.bulk_create(fresh)
                fresh = []
        Entity.objects.bulk_create(fresh)
        self.entity_ids = {
            (e.character_id, e.name.lower()): e.pk
            for e in Entity.objects.filter(user=self.user).only("character_id", "name")
        }

    def _memory_values(self, record: dict[str, Any], *, file: str, line: int) -> dict[str, Any]:
        """A memory line's columns, from its checked fields; what it belongs to must be in the archive."""
        kind = record["kind"]
        character = self.characters.get(str(record["character"])) if record.get("character") else None
        chat = self.chats.get(str(record["chat"])) if record.get("chat") else None
        if record.get("character") and character is None:
            raise ArchiveError("its character is not in the archive", file=file, line=line)
        if record.get("chat") and chat is None:
            raise ArchiveError("its chat is not in the archive", file=file, line=line)
        if character is None and chat is None or (kind in CHAT_ONLY_KINDS and chat is None):
            raise ArchiveError("a memory belongs to a character or to a chat", file=file, line=line)
        content = record["content"]
        return {
            "kind": kind,
            "content": content,
            "content_hash": text_hash(content),
            "data": record.get("data") or {},
            "importance": record.get("importance", 2),
            "confidence": record.get("confidence", 0.7),
            "time_scope": record.get("time_scope", ""),
            "valid_from": record.get("valid_from"),
            "valid_to": record.get("valid_to"),
            "status": record.get("status", Status.ACTIVE),
            "retired_reason": record.get("retired_reason", ""),
            "occurred_at": record.get("occurred_at"),
            "source_instance": record["source_instance"],
            "participating_instances": record["participating_instances"],
            "origin": record.get("origin") or "import",
            "edited_by": record.get("edited_by", ""),
            "source_message_indices": record["source_message_indices"],
            "character_id": character,
            "chat_id": chat,
            "clock": record["clock"],
            "changed_at": record["changed_at"],
            "changed_by": record["changed_by"],
        }

    def memories_in(self) -> None:
        """Memories a batch at a time as their lines come (a line's content is not kept once it is stored); their
        chains and entities once every memory is in."""
        name = "memories.jsonl"
        total = self.expected("memories")
        present = set(FeedEntry.objects.filter(user=self.user, type=FeedType.MEMORY).values_list("uid", flat=True))
        links: list[_Link] = []
        batch: list[tuple[uuid.UUID, dict[str, Any], _Link]] = []
        for position, (number, row) in enumerate(self.archive.lines(name)):
            if position % BATCH == 0:
                of = f" of {total:,}" if total else ""
                self.progress(f"memories {position:,}{of}", 50 + int(40 * min(position / max(total, 1), 1)))
            archived = _uuid(row.get("uid"), file=name, line=number)
            if archived in self.uids:
                raise ArchiveError("a memory with this uid came before", file=name, line=number)
            record = record_check(MemoryRecordSerializer, row, file=name, line=number)
            values = self._memory_values(record, file=name, line=number)
            uid = self.uids[archived] = self.local(Memory, archived)
            batch.append((uid, values, self._link(uid, record)))
            if len(batch) >= BATCH:
                self._memories_store(batch, present, links)
                batch = []
        self._memories_store(batch, present, links)
        self.progress("memory chains", 92)
        self._links(links)

    def _link(self, uid: uuid.UUID, record: dict[str, Any]) -> _Link:
        character = self.characters.get(str(record["character"])) if record.get("character") else None
        names = tuple(entity["name"].lower() for entity in record.get("entities") or [])
        return _Link(uid, record.get("superseded_by"), tuple(record["contradicts"]), character, names)

    def _memories_store(
        self, batch: list[tuple[uuid.UUID, dict[str, Any], _Link]], present: set[uuid.UUID], links: list[_Link]
    ) -> None:
        stored = {
            m.uid: m
            for m in Memory.objects.filter(user=self.user, uid__in=[uid for uid, _, _ in batch]).defer("embedding")
        }
        fresh: list[Memory] = []
        for uid, values, link in batch:
            memory = stored.get(uid)
            deleted = (FeedType.MEMORY, uid) in self.tombstoned or (memory is not None and uid not in present)
            if deleted and not self.restore:
                self.count("memories", "deleted here")
                continue
            if memory is None:
                fresh.append(Memory(user=self.user, uid=uid, **values))
                links.append(link)
                self.count("memories", "revived" if deleted else "created")
                continue
            links.append(link)
            side, clock = self.winner(values["clock"], values["changed_at"], values["changed_by"], memory)
            if deleted:
                side, clock = "archive", clocks.tick(clocks.merge(values["clock"], memory.clock), clocks.SERVER)
            if side == "same":
                self.count("memories", "same")
                continue
            if side == "stored":
                if clock != memory.clock:
                    if memory.kind == Kind.DAILY and values["kind"] == Kind.DAILY:
                        merged = daily_merge(memory.content, values["content"], values["changed_by"] or "archive")
                        Memory.objects.filter(pk=memory.pk).update(
                            content=merged,
                            content_hash=text_hash(merged),
                            embedding=None,
                            embedding_model="",
                            embedding_dim=None,
                            clock=clock,
                        )
                        self.embed = True
                        self.count("memories", "merged")
                        continue
                    Memory.objects.filter(pk=memory.pk).update(clock=clock)
                self.count("memories", "kept")
                continue
            values["clock"] = clock
            if values["content_hash"] != memory.content_hash:
                values |= {"embedding": None, "embedding_model": "", "embedding_dim": None}
                self.embed = True
            Memory.objects.filter(pk=memory.pk).update(**values, updated_at=timezone.now())
            if deleted:
                feed_revive(user_id=self.user.pk, kind=FeedType.MEMORY, uid=uid)
            self.count("memories", "revived" if deleted else "updated")
        Memory.objects.bulk_create(fresh, batch_size=BATCH)
        for memory in fresh:
            if (FeedType.MEMORY, memory.uid) in self.tombstoned:
                feed_revive(user_id=self.user.pk, kind=FeedType.MEMORY, uid=memory.uid)
        if fresh:
            self.embed = True

    def _links(self, links: list[_Link]) -> None:
        """Chains and entities by uid, once every memory is in."""
        ids = dict(Memory.objects.filter(user=self.user).exclude(kind=Kind.MESSAGE).values_list("uid", "id"))
        superseded, contradicts, mentions = [], [], []
        for link in links:
            memory_id = ids.get(link.uid)
            if memory_id is None:
                continue
            if link.superseded_by:
                later_id = ids.get(self.uids.get(link.superseded_by, link.superseded_by))
                if later_id and later_id != memory_id:
                    superseded.append((later_id, memory_id))
            for other in link.contradicts:
                other_id = ids.get(self.uids.get(other, other))
                if other_id and other_id != memory_id:
                    contradicts += [(memory_id, other_id), (other_id, memory_id)]
            for label in link.entities:
                entity_id = self.entity_ids.get((link.character, label)) or self.entity_ids.get((None, label))
                if entity_id:
                    mentions.append((memory_id, entity_id))
        if superseded:
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lorekeeper.sync_quiet = 'on'")  # the chain as archived, clocks as they were
                cursor.executemany(
                    "UPDATE memories_memory SET superseded_by_id = %s WHERE id = %s AND superseded_by_id IS DISTINCT "
                    "FROM %s",
                    [(later, memory, later) for later, memory in superseded],
                )
                cursor.execute("SET LOCAL lorekeeper.sync_quiet = 'off'")
        through = Memory.contradicts.through
        through.objects.bulk_create(
            [through(from_memory_id=a, to_memory_id=b) for a, b in contradicts], ignore_conflicts=True
        )
        mention = Memory.entities.through
        mention.objects.bulk_create(
            [mention(memory_id=a, entity_id=b) for a, b in mentions], ignore_conflicts=True, batch_size=BATCH
        )

    # settings and tombstones

    def settings_in(self) -> None:
        name = "settings.json"
        raw = self.archive.json(name)
        if raw is None:
            return
        record = record_check(SettingsRecordSerializer, raw, file=name, line=1)
        settings_get(user=self.user)
        stored = SettingsDocument.objects.select_for_update().get(user=self.user)
        side, kept = self.winner(record["clock"], record["changed_at"], record["changed_by"], stored)
        if side == "archive":
            stored.data, stored.clock, stored.changed_at = record["document"], kept, record["changed_at"]
            stored.changed_by = record["changed_by"]
            stored.integrity = uuid.uuid4()
            stored.save()
            self.counts["settings"] = {"updated": 1}
        else:
            if kept != stored.clock:
                SettingsDocument.objects.filter(pk=stored.pk).update(clock=kept)
            self.counts["settings"] = {"kept": 1}

    def tombstones_in(self) -> None:
        """What the archive's account deleted stays deleted here (a restore brings those back instead)."""
        if self.restore:
            return
        name = "tombstones.jsonl"
        for number, row in self.archive.lines(name):
            record = record_check(TombstoneRecordSerializer, row, file=name, line=number)
            kind = record["type"]
            if kind not in (FeedType.MEMORY, FeedType.CHARACTER):
                continue
            model = Memory if kind == FeedType.MEMORY else Character
            uid = self.local(model, record["uid"])
            clock = record["clock"]
            target = model.objects.filter(user=self.user, uid=uid).first()
            if target is not None and clocks.compare(target.clock, clock) is Order.AFTER:
                continue  # changed here after the deletion it saw: kept
            if target is not None and kind == FeedType.CHARACTER:
                target.delete()
            elif target is not None and target.status == Status.ACTIVE:
                Memory.objects.filter(pk=target.pk).update(status=Status.RETIRED, retired_reason="deleted")
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT sync_feed_tombstone(%s, %s, %s, %s::jsonb, %s)",
                    [self.user.pk, kind, uid, json.dumps(clock), record["deleted_by"]],
                )
            self.count("tombstones", "applied")


def archive_import(
    *, user: AbstractUser, source: BinaryIO, restore: bool = False, progress: Progress = _quiet
) -> dict[str, Any]:
    """Merge an archive into the account (see the module's docstring); `restore` also brings back what was deleted
    since. All or nothing: every line is checked as the API checks what it stores, every member streamed and
    counted against LOREKEEPER_MAX_ARCHIVE_BYTES (apps/sync/services/archive_zip.py). Returns what happened, by
    kind."""
    archive = ArchiveReader(source)
    job = _Import(user, archive, restore, progress)
    with transaction.atomic():
        progress("characters", 5)
        job.characters_in()
        job.chats_in()
        progress("entities", 50)
        job.entities_in()
        job.memories_in()
        progress("settings", 95)
        job.settings_in()
        job.tombstones_in()
        if job.embed:
            embed_later(user_id=user.pk)
    progress("done", 100)
    return job.counts
