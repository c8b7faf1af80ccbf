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
"""

from __future__ import annotations

import gzip
import io
import json
import uuid
import zipfile
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, BinaryIO

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.chats.models import Character, Chat
from apps.chats.services.characters import CHARACTER_FIELDS
from apps.chats.services.chats import chat_export_lines, chat_import, repeatable_read
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import text_hash
from apps.memories.models import Entity, Kind, Memory, Status
from apps.memories.services.memories import CHAT_ONLY_KINDS, embed_later
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import ChatRevision, FeedEntry, FeedType, Instance, SettingsDocument
from apps.sync.services.chats import _replace_contents, _snapshot
from apps.sync.services.daily import daily_merge
from apps.sync.services.feed import MEMORY_FIELDS as FEED_MEMORY_FIELDS
from apps.sync.services.feed import feed_revive
from apps.sync.services.settings import settings_get

FORMAT = "lorekeeper-archive"
ARCHIVE_NAMESPACE = uuid.UUID("5f0c6e3a-8a4e-4f3b-9a57-6b1f2d0c7e11")
VERSION = 1
BATCH = 1000
# What a memory line holds besides its uid, clock and references (its creation time is written apart).
MEMORY_FIELDS = (*(name for name in FEED_MEMORY_FIELDS if name != "created_at"), "source_message_indices")
Progress = Callable[[str, int], None]


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


# --- reading ----------------------------------------------------------------------------------------------------


class ArchiveError(ApplicationError):
    def __init__(self, message: str, *, file: str = "", line: int | None = None) -> None:
        extra: dict[str, Any] = {"field": "archive"}
        if file:
            extra["file"] = file
        if line is not None:
            extra["line"] = line
        where = f"{file}, line {line}: " if line is not None else (f"{file}: " if file else "")
        super().__init__(f"{where}{message}", extra)


def _open(source: BinaryIO) -> zipfile.ZipFile:
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile as exc:
        raise ArchiveError("This is not a Lorekeeper archive (not a zip file).") from exc
    limit = settings.LOREKEEPER_MAX_ARCHIVE_BYTES
    if sum(info.file_size for info in archive.infolist()) > limit:
        raise ArchiveError(f"The archive unpacks to more than {limit // 1024**2:,} MB.")
    try:
        manifest = json.loads(archive.read("manifest.json"))
    except KeyError as exc:
        raise ArchiveError("The archive has no manifest.json: it is not a Lorekeeper archive.") from exc
    except ValueError as exc:
        raise ArchiveError("manifest.json is not JSON.", file="manifest.json") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError("This is not a Lorekeeper archive.", file="manifest.json")
    if manifest.get("version") != VERSION:
        raise ArchiveError(f"Archive version {manifest.get('version')!r} is not one this server reads ({VERSION}).")
    return archive


def _lines(archive: zipfile.ZipFile, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = archive.open(name)
    except KeyError:
        return
    with handle:
        for number, raw in enumerate(io.TextIOWrapper(handle, encoding="utf-8"), start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError as exc:
                raise ArchiveError(f"not JSON ({exc.msg})", file=name, line=number) from exc
            if not isinstance(value, dict):
                raise ArchiveError("each line is a JSON object", file=name, line=number)
            yield number, value


def _uuid(value: Any, *, file: str, line: int, field: str = "uid") -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError) as exc:
        raise ArchiveError(f"{field} is not a uuid", file=file, line=line) from exc


def _clock(value: Any, *, file: str, line: int) -> dict[str, int]:
    value = value if value is not None else {}
    problem = clocks.clock_problem(value)
    if problem:
        raise ArchiveError(problem, file=file, line=line)
    return value


def _when(value: Any, *, file: str, line: int, field: str) -> datetime | None:
    if value in (None, ""):
        return None
    parsed = parse_datetime(str(value)) if isinstance(value, str) else None
    if parsed is None:
        raise ArchiveError(f"{field} is not an ISO date and time", file=file, line=line)
    return parsed


# --- importing --------------------------------------------------------------------------------------------------


class _Import:
    def __init__(self, user: AbstractUser, archive: zipfile.ZipFile, restore: bool, progress: Progress) -> None:
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
        for number, row in _lines(self.archive, name):
            archived = _uuid(row.get("uid"), file=name, line=number)
            uid = self.local(Character, archived)
            clock = _clock(row.get("clock"), file=name, line=number)
            changed_at = _when(row.get("changed_at"), file=name, line=number, field="changed_at")
            fields = {field: row[field] for field in CHARACTER_FIELDS if field in row}
            if not isinstance(fields.get("name"), str) or not fields["name"].strip():
                raise ArchiveError("a character needs a name", file=name, line=number)
            for field in CHARACTER_FIELDS:
                if field in ("tags", "card_data") or field not in fields:
                    continue
                if not isinstance(fields[field], str):
                    raise ArchiveError(f"{field} is text", file=name, line=number)
            stored = Character.objects.filter(user=self.user, uid=uid).first()
            if stored is None:
                if (FeedType.CHARACTER, uid) in self.tombstoned and not self.restore:
                    self.count("characters", "deleted here")
                    continue
                character = Character.objects.create(
                    user=self.user,
                    uid=uid,
                    clock=clock,
                    changed_at=changed_at,
                    changed_by=str(row.get("changed_by", ""))[:64],
                    source_instance=str(row.get("source_instance", "")),
                    participating_instances=list(row.get("participating_instances") or []),
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
            side, kept_clock = self.winner(clock, changed_at, row.get("changed_by", ""), stored)
            if side == "archive":
                for field, value in fields.items():
                    setattr(stored, field, value)
                stored.clock, stored.changed_at = kept_clock, changed_at
                stored.changed_by = str(row.get("changed_by", ""))[:64]
                stored.save()
                self.count("characters", "updated")
            else:
                if kept_clock != stored.clock:
                    Character.objects.filter(pk=stored.pk).update(clock=kept_clock)
                self.count("characters", "kept")

    # chats

    def chats_in(self) -> None:
        name = "chats.jsonl"
        rows = list(_lines(self.archive, name))
        for position, (number, row) in enumerate(rows):
            self.progress(f"chat {position + 1} of {len(rows)}", 10 + int(40 * position / max(len(rows), 1)))
            archived = _uuid(row.get("uid"), file=name, line=number)
            uid = self.local(Chat, archived)
            path = row.get("file") or f"chats/{archived}.jsonl"
            if not isinstance(path, str) or path not in self.archive.namelist():
                raise ArchiveError(f"the chat's file {path!r} is not in the archive", file=name, line=number)
            characters = [self.characters.get(str(c)) for c in row.get("characters") or []]
            characters = [c for c in characters if c is not None]
            stored = Chat.objects.filter(user=self.user, uid=uid).first()
            jsonl = self.archive.read(path)
            if stored is None:
                chat = chat_import(
                    user=self.user,
                    stream=io.BytesIO(jsonl),
                    filename=path,
                    title=str(row.get("title") or "")[:300],
                    character_ids=characters,
                )
                same = {"uid": uid}
                if row.get("integrity"):  # the same version as archived
                    same["integrity"] = _uuid(row["integrity"], file=name, line=number, field="integrity")
                Chat.objects.filter(pk=chat.pk).update(**same)
                self.chats[str(archived)] = chat.pk
                self.count("chats", "created")
                continue
            self.chats[str(archived)] = stored.pk
            if str(stored.integrity) == str(row.get("integrity")):
                self.count("chats", "same")
                continue
            if self.restore:
                _snapshot(stored, reason="before restoring a backup")
                _replace_contents(stored, io.BytesIO(jsonl))
                self.count("chats", "restored")
            else:
                buffer = io.BytesIO()
                with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6) as gz:
                    gz.write(jsonl)
                ChatRevision.objects.create(
                    chat=stored,
                    reason="imported archive (kept beside the current chat)",
                    integrity=_uuid(row.get("integrity"), file=name, line=number, field="integrity"),
                    message_count=max(jsonl.count(b"\n"), 0),
                    jsonl_gzip=buffer.getvalue(),
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
        for number, row in _lines(self.archive, name):
            label = str(row.get("name") or "").strip()[:200]
            if not label:
                raise ArchiveError("an entity needs a name", file=name, line=number)
            character = self.characters.get(str(row.get("character"))) if row.get("character") else None
            if (character, label.lower()) in known:
                continue
            known.add((character, label.lower()))
            aliases = [str(a)[:200] for a in row.get("aliases") or []]
            fresh.append(
                Entity(
                    user=self.user,
                    character_id=character,
                    name=label,
                    type=str(row.get("type") or "")[:50],
                    aliases=aliases,
                )
            )
        Entity.objects.bulk_create(fresh, batch_size=BATCH)
        self.entity_ids = {
            (e.character_id, e.name.lower()): e.pk
            for e in Entity.objects.filter(user=self.user).only("character_id", "name")
        }

    def _memory_values(self, row: dict[str, Any], *, file: str, line: int) -> dict[str, Any]:
        kind = row.get("kind")
        if kind not in Kind.values or kind == Kind.MESSAGE:
            raise ArchiveError(f"kind {kind!r} is not a memory kind", file=file, line=line)
        content = row.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ArchiveError("a memory needs content", file=file, line=line)
        character = self.characters.get(str(row.get("character"))) if row.get("character") else None
        chat = self.chats.get(str(row.get("chat"))) if row.get("chat") else None
        if row.get("character") and character is None:
            raise ArchiveError("its character is not in the archive", file=file, line=line)
        if row.get("chat") and chat is None:
            raise ArchiveError("its chat is not in the archive", file=file, line=line)
        if character is None and chat is None or (kind in CHAT_ONLY_KINDS and chat is None):
            raise ArchiveError("a memory belongs to a character or to a chat", file=file, line=line)
        importance = row.get("importance", 2)
        confidence = row.get("confidence", 0.7)
        if not isinstance(importance, int) or not 1 <= importance <= 3:
            raise ArchiveError("importance is 1, 2 or 3", file=file, line=line)
        if not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise ArchiveError("confidence is from 0 to 1", file=file, line=line)
        status = row.get("status", Status.ACTIVE)
        if status not in Status.values:
            raise ArchiveError(f"status {status!r} is not active or retired", file=file, line=line)
        data = row.get("data") or {}
        if not isinstance(data, dict):
            raise ArchiveError("data is an object", file=file, line=line)
        content = content.strip()
        return {
            "kind": kind,
            "content": content,
            "content_hash": text_hash(content),
            "data": data,
            "importance": importance,
            "confidence": float(confidence),
            "time_scope": str(row.get("time_scope") or "")[:20],
            "valid_from": row.get("valid_from"),
            "valid_to": row.get("valid_to"),
            "status": status,
            "retired_reason": str(row.get("retired_reason") or "")[:50],
            "occurred_at": _when(row.get("occurred_at"), file=file, line=line, field="occurred_at"),
            "source_instance": str(row.get("source_instance") or "")[:100],
            "participating_instances": [str(i)[:100] for i in row.get("participating_instances") or []],
            "origin": str(row.get("origin") or "import")[:20],
            "edited_by": str(row.get("edited_by") or "")[:64],
            "source_message_indices": [
                i for i in row.get("source_message_indices") or [] if isinstance(i, int) and i >= 0
            ],
            "character_id": character,
            "chat_id": chat,
            "clock": _clock(row.get("clock"), file=file, line=line),
            "changed_at": _when(row.get("changed_at"), file=file, line=line, field="changed_at"),
            "changed_by": str(row.get("changed_by") or "")[:64],
        }

    def memories_in(self) -> None:
        name = "memories.jsonl"
        rows = list(_lines(self.archive, name))
        for number, row in rows:
            archived = _uuid(row.get("uid"), file=name, line=number)
            self.uids[archived] = self.local(Memory, archived)
        stored = {
            m.uid: m for m in Memory.objects.filter(user=self.user, uid__in=self.uids.values()).defer("embedding")
        }
        present = set(FeedEntry.objects.filter(user=self.user, type=FeedType.MEMORY).values_list("uid", flat=True))
        fresh: list[Memory] = []
        links: list[tuple[uuid.UUID, dict[str, Any]]] = []
        for position, (number, row) in enumerate(rows):
            if position % BATCH == 0:
                self.progress(f"memories {position:,} of {len(rows):,}", 50 + int(40 * position / max(len(rows), 1)))
            uid = self.uids[_uuid(row.get("uid"), file=name, line=number)]
            values = self._memory_values(row, file=name, line=number)
            memory = stored.get(uid)
            deleted = (FeedType.MEMORY, uid) in self.tombstoned or (memory is not None and uid not in present)
            if deleted and not self.restore:
                self.count("memories", "deleted here")
                continue
            if memory is None:
                fresh.append(Memory(user=self.user, uid=uid, **values))
                links.append((uid, row))
                self.count("memories", "revived" if deleted else "created")
                continue
            links.append((uid, row))
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
        self.progress("memory chains", 92)
        self._links(links)

    def _links(self, links: list[tuple[uuid.UUID, dict[str, Any]]]) -> None:
        """Chains and entities by uid, once every memory is in."""
        ids = dict(Memory.objects.filter(user=self.user).exclude(kind=Kind.MESSAGE).values_list("uid", "id"))
        superseded, contradicts, mentions = [], [], []
        for uid, row in links:
            memory_id = ids.get(uid)
            if memory_id is None:
                continue
            later = row.get("superseded_by")
            if later:
                later = _uuid(later, file="memories.jsonl", line=0, field="superseded_by")
                later_id = ids.get(self.uids.get(later, later))
                if later_id and later_id != memory_id:
                    superseded.append((later_id, memory_id))
            for other in row.get("contradicts") or []:
                other = _uuid(other, file="memories.jsonl", line=0, field="contradicts")
                other_id = ids.get(self.uids.get(other, other))
                if other_id and other_id != memory_id:
                    contradicts += [(memory_id, other_id), (other_id, memory_id)]
            character = self.characters.get(str(row.get("character"))) if row.get("character") else None
            for entity in row.get("entities") or []:
                label = str(entity.get("name", "") if isinstance(entity, dict) else "").strip().lower()
                entity_id = self.entity_ids.get((character, label)) or self.entity_ids.get((None, label))
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
        try:
            raw = json.loads(self.archive.read("settings.json"))
        except KeyError:
            return
        except ValueError as exc:
            raise ArchiveError("not JSON", file="settings.json") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("document", {}), dict):
            raise ArchiveError("the settings document is an object", file="settings.json")
        document = raw.get("document", {})
        if not all(isinstance(value, dict) for value in document.values()):
            raise ArchiveError("each settings namespace is an object", file="settings.json")
        clock = _clock(raw.get("clock"), file="settings.json", line=1)
        changed_at = _when(raw.get("changed_at"), file="settings.json", line=1, field="changed_at")
        settings_get(user=self.user)
        stored = SettingsDocument.objects.select_for_update().get(user=self.user)
        side, kept = self.winner(clock, changed_at, raw.get("changed_by", ""), stored)
        if side == "archive":
            stored.data, stored.clock, stored.changed_at = document, kept, changed_at
            stored.changed_by = str(raw.get("changed_by") or "")[:64]
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
        for number, row in _lines(self.archive, name):
            kind = row.get("type")
            if kind not in (FeedType.MEMORY, FeedType.CHARACTER):
                continue
            model = Memory if kind == FeedType.MEMORY else Character
            uid = self.local(model, _uuid(row.get("uid"), file=name, line=number))
            clock = _clock(row.get("clock"), file=name, line=number)
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
                    [self.user.pk, kind, uid, json.dumps(clock), str(row.get("deleted_by") or "")[:64]],
                )
            self.count("tombstones", "applied")


def archive_import(
    *, user: AbstractUser, source: BinaryIO, restore: bool = False, progress: Progress = _quiet
) -> dict[str, Any]:
    """Merge an archive into the account (see the module's docstring); `restore` also brings back what was deleted
    since. All or nothing. Returns what happened, by kind."""
    archive = _open(source)
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
