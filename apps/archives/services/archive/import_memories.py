"""An archive's entities and memories, merged into the account (apps/archives/services/archive/importing.py runs
them in order, after the characters and chats they belong to). Memories come a batch at a time; their chains,
contradictions and entities are linked by uid once every memory is in."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from django.db import connection
from django.utils import timezone

from apps.archives.services.archive.format import BATCH, ArchiveError
from apps.archives.services.archive.merge import ArchiveImport, archived_uid
from apps.archives.services.archive.records import EntityRecordSerializer, MemoryRecordSerializer, record_check
from apps.memories.embeddings import text_hash
from apps.memories.models import Entity, Kind, Memory, Status
from apps.memories.services.memories import CHAT_ONLY_KINDS
from apps.sync import clocks
from apps.sync.models import FeedEntry, FeedType
from apps.sync.services.daily import daily_merge
from apps.sync.services.feed import feed_revive


class _Link(NamedTuple):
    """What a memory line says of other rows (its chain, contradictions, entities), kept until all are in."""

    uid: uuid.UUID
    superseded_by: uuid.UUID | None
    contradicts: tuple[uuid.UUID, ...]
    character: int | None
    entities: tuple[str, ...]


def entities_in(job: ArchiveImport) -> None:
    name = "entities.jsonl"
    known = {
        (e.character_id, e.name.lower()) for e in Entity.objects.filter(user=job.user).only("character_id", "name")
    }
    fresh = []
    for number, row in job.archive.lines(name):
        record = record_check(EntityRecordSerializer, row, file=name, line=number)
        label = record["name"]
        character = job.characters.get(str(record["character"])) if record.get("character") else None
        if (character, label.lower()) in known:
            continue
        known.add((character, label.lower()))
        fresh.append(
            Entity(
                user=job.user,
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
    job.entity_ids = {
        (e.character_id, e.name.lower()): e.pk
        for e in Entity.objects.filter(user=job.user).only("character_id", "name")
    }


def _memory_values(job: ArchiveImport, record: dict[str, Any], *, file: str, line: int) -> dict[str, Any]:
    """A memory line's columns, from its checked fields; what it belongs to must be in the archive."""
    kind = record["kind"]
    character = job.characters.get(str(record["character"])) if record.get("character") else None
    chat = job.chats.get(str(record["chat"])) if record.get("chat") else None
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
        "created_at": record.get("created_at") or timezone.now(),
    }


def memories_in(job: ArchiveImport) -> None:
    """Memories a batch at a time as their lines come (a line's content is not kept once it is stored); their
    chains and entities once every memory is in."""
    name = "memories.jsonl"
    total = job.expected("memories")
    present = set(FeedEntry.objects.filter(user=job.user, type=FeedType.MEMORY).values_list("uid", flat=True))
    links: list[_Link] = []
    batch: list[tuple[uuid.UUID, dict[str, Any], _Link]] = []
    for position, (number, row) in enumerate(job.archive.lines(name)):
        if position % BATCH == 0:
            of = f" of {total:,}" if total else ""
            job.progress(f"memories {position:,}{of}", 50 + int(40 * min(position / max(total, 1), 1)))
        archived = archived_uid(row.get("uid"), file=name, line=number)
        if archived in job.uids:
            raise ArchiveError("a memory with this uid came before", file=name, line=number)
        record = record_check(MemoryRecordSerializer, row, file=name, line=number)
        values = _memory_values(job, record, file=name, line=number)
        uid = job.uids[archived] = job.local(Memory, archived)
        batch.append((uid, values, _link(job, uid, record)))
        if len(batch) >= BATCH:
            _memories_store(job, batch, present, links)
            batch = []
    _memories_store(job, batch, present, links)
    job.progress("memory chains", 92)
    _links(job, links)


def _link(job: ArchiveImport, uid: uuid.UUID, record: dict[str, Any]) -> _Link:
    character = job.characters.get(str(record["character"])) if record.get("character") else None
    names = tuple(entity["name"].lower() for entity in record.get("entities") or [])
    return _Link(uid, record.get("superseded_by"), tuple(record["contradicts"]), character, names)


def _memory_kept(job: ArchiveImport, memory: Memory, values: dict[str, Any], clock: dict) -> None:
    """The stored version wins: it takes the merged clock, and two versions of a day's memory are merged."""
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
            job.embed = True
            job.count("memories", "merged")
            return
        Memory.objects.filter(pk=memory.pk).update(clock=clock)
    job.count("memories", "kept")


def _memories_store(
    job: ArchiveImport,
    batch: list[tuple[uuid.UUID, dict[str, Any], _Link]],
    present: set[uuid.UUID],
    links: list[_Link],
) -> None:
    stored = {
        m.uid: m for m in Memory.objects.filter(user=job.user, uid__in=[uid for uid, _, _ in batch]).defer("embedding")
    }
    fresh: list[Memory] = []
    for uid, values, link in batch:
        memory = stored.get(uid)
        deleted = (FeedType.MEMORY, uid) in job.tombstoned or (memory is not None and uid not in present)
        if deleted and not job.restore:
            job.count("memories", "deleted here")
            continue
        if memory is None:
            fresh.append(Memory(user=job.user, uid=uid, **values))
            links.append(link)
            job.count("memories", "revived" if deleted else "created")
            continue
        links.append(link)
        side, clock = job.winner(values["clock"], values["changed_at"], values["changed_by"], memory)
        if deleted:
            side, clock = "archive", clocks.tick(clocks.merge(values["clock"], memory.clock), clocks.SERVER)
        if side == "same":
            job.count("memories", "same")
            continue
        if side == "stored":
            _memory_kept(job, memory, values, clock)
            continue
        values["clock"] = clock
        values.pop("created_at")  # a memory here keeps when it was made: a line without one must not move it
        if values["content_hash"] != memory.content_hash:
            values |= {"embedding": None, "embedding_model": "", "embedding_dim": None}
            job.embed = True
        Memory.objects.filter(pk=memory.pk).update(**values, updated_at=timezone.now())
        if deleted:
            feed_revive(user_id=job.user.pk, kind=FeedType.MEMORY, uid=uid)
        job.count("memories", "revived" if deleted else "updated")
    created = [memory.created_at for memory in fresh]
    Memory.objects.bulk_create(fresh, batch_size=BATCH)
    # Written as the archive has it: bulk_create stamps a new memory's creation with now (auto_now_add).
    for memory, at in zip(fresh, created, strict=True):
        memory.created_at = at
    Memory.objects.bulk_update(fresh, ["created_at"], batch_size=BATCH)
    for memory in fresh:
        if (FeedType.MEMORY, memory.uid) in job.tombstoned:
            feed_revive(user_id=job.user.pk, kind=FeedType.MEMORY, uid=memory.uid)
    if fresh:
        job.embed = True


def _links(job: ArchiveImport, links: list[_Link]) -> None:
    """Chains and entities by uid, once every memory is in."""
    ids = dict(Memory.objects.filter(user=job.user).exclude(kind=Kind.MESSAGE).values_list("uid", "id"))
    superseded, contradicts, mentions = [], [], []
    for link in links:
        memory_id = ids.get(link.uid)
        if memory_id is None:
            continue
        if link.superseded_by:
            later_id = ids.get(job.uids.get(link.superseded_by, link.superseded_by))
            if later_id and later_id != memory_id:
                superseded.append((later_id, memory_id))
        for other in link.contradicts:
            other_id = ids.get(job.uids.get(other, other))
            if other_id and other_id != memory_id:
                contradicts += [(memory_id, other_id), (other_id, memory_id)]
        for label in link.entities:
            entity_id = job.entity_ids.get((link.character, label)) or job.entity_ids.get((None, label))
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
