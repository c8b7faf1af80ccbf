"""Applying an instance's queued changes (entity-core's sync_push, with the vector clocks it leaves unused:
docs/GLOSSARY.md).

Each change carries the clock of the version the instance made. Against the stored clock:
- it descends from the stored one (or is a create): applied;
- it is the stored one: applied already (a retry), nothing changes;
- the stored one descends from it: rejected as stale, and the answer carries the stored version to adopt;
- neither descends from the other (concurrent): a conflict, resolved by the object's rule —
  characters and settings (identity documents): last write wins, by the change's time to the second, then the
  instance's priority, then its key; memories: last write wins the same way, except daily memories, whose bullets
  merge, and weekly, monthly, yearly and significant ones, where the push is authoritative.
  Either way the result's clock descends from both, so every instance takes the result at its next pull.
- `edit` is a person's correction (entity-core's memory/update): it overwrites whatever is stored, records who
  edited, and counts a version.
- `delete` is final: the object is removed (a memory is retired, kept in its history) and a tombstone goes on the
  feed; a later change to it from an instance that had not seen the deletion is rejected, and it never comes back
  under that uid. A deletion wins over edits made concurrently with it.
A memory whose content changes gets a new vector (embedded later, as any new content).

Uids are unique across all users (and a memory's across kinds). A create under a uid this user's syncable objects
do not hold, but something else does (another user's object or tombstone, or one of the user's message memories),
is refused whole with one 409 `uid_unavailable` that says nothing of what holds it: the client makes a new uid.
"""

from __future__ import annotations

import json
import uuid as uuid_module
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.chats.models import Character, Chat
from apps.chats.services.characters import CHARACTER_FIELDS
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import text_hash
from apps.memories.models import Kind, Memory, Status
from apps.memories.services.memories import CHAT_ONLY_KINDS, embed_later, entities_ensure
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedEntry, FeedType, Instance, SettingsDocument
from apps.sync.services import daily
from apps.sync.services.feed import MEMORY_WRITABLE, PAYLOADS, feed_head, feed_order, tombstone_payload
from apps.sync.services.settings import settings_get

PUSH_LOCK = 0x5350  # pg_advisory_xact_lock(PUSH_LOCK, user id): one push of a user at a time
MAX_CHANGES = 1000
FEED_CONSTRAINT = "sync_feed_one_per_object"  # apps.sync.models.FeedEntry: one entry per object
# Entities named across a push's memories (at most 50 each): each costs queries while the user's push lock is held.
MAX_PUSH_ENTITIES = 2000
AUTHORITATIVE_KINDS = {Kind.WEEKLY, Kind.MONTHLY, Kind.YEARLY, Kind.SIGNIFICANT}

APPLIED, MERGED, RESOLVED, REJECTED = "applied", "merged", "conflict_resolved", "rejected"


@dataclass
class Change:
    """One validated change of a push (ChangeSerializer in apps/sync/apis/instances.py checks the shape)."""

    index: int
    type: str
    op: str  # create, update, edit, delete
    uid: UUID | None
    clock: dict[str, int]
    modified_at: datetime
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    index: int
    type: str
    uid: str
    result: str
    clock: dict[str, int]
    reason: str = ""
    winner: str = ""  # of a conflict: "incoming" or "server"
    item: dict[str, Any] | None = None  # the stored version, when the instance's is not it


@dataclass
class Pushed:
    outcomes: list[Outcome]
    cursor: int


class _Push:
    """One push: the user, the pushing instance, and the priorities of all the user's instances (for ties)."""

    def __init__(self, user: AbstractUser, instance: Instance) -> None:
        self.user = user
        self.instance = instance
        self.key = instance.key
        self.priorities = dict(Instance.objects.filter(user=user).values_list("key", "priority"))
        self.touched: set[UUID] = set()
        self.embed = False  # some content changed: new vectors are due (one task for the whole push)
        self.entries: dict[tuple[str, UUID], FeedEntry | None] = {}
        self.memories: dict[UUID, Memory] = {}
        self.characters: dict[UUID, Character] = {}
        self.chats: dict[int, Chat] = {}
        self.superseding: dict[UUID, int] = {}
        self.entity_names: dict[int, set[str]] = {}
        self.pending: dict[UUID, tuple[Memory, set[str]]] = {}  # stored memories changed, not written yet
        self.unavailable: set[tuple[str, UUID]] = set()  # uids a create cannot take: held by something else

    def write_later(self, memory: Memory, columns: list[str]) -> None:
        """Stored memories are written together, in as few statements as their changed columns allow (a push
        of 500 edits is not 500 round trips); anything that reads them back flushes first."""
        _, before = self.pending.get(memory.uid, (memory, set()))
        self.pending[memory.uid] = (memory, before | set(columns))

    def flush(self) -> None:
        groups: dict[tuple[str, ...], list[Memory]] = {}
        for memory, columns in self.pending.values():
            groups.setdefault(tuple(sorted(columns)), []).append(memory)
        self.pending.clear()
        for names, memories in groups.items():
            fields = [Memory._meta.get_field(name) for name in names]
            sql = "UPDATE memories_memory SET {} WHERE id = %s".format(
                ", ".join(f"{connection.ops.quote_name(field.column)} = %s" for field in fields)
            )
            rows = [
                [field.get_db_prep_save(getattr(memory, field.attname), connection) for field in fields] + [memory.pk]
                for memory in memories
            ]
            with connection.cursor() as cursor:
                cursor.executemany(sql, rows)  # psycopg pipelines these: one round trip, not one per memory

    def preload(self, changes: list[Change]) -> None:
        """Read once what the changes touch or name (a push of 500 is not 2,500 single-row reads); the rows
        to change are locked. Kept in step as the push writes."""
        uids = {c.uid for c in changes if c.uid}
        for entry in FeedEntry.objects.filter(uid__in=uids):
            self.entries[(entry.type, entry.uid)] = entry
        for change in changes:
            self.entries.setdefault((change.type, change.uid), None)  # not on any feed (yet)
        memory_uids = {c.uid for c in changes if c.type == FeedType.MEMORY and c.uid}
        self.memories = {
            m.uid: m
            for m in Memory.objects.select_for_update()
            .filter(user=self.user, uid__in=memory_uids)
            .exclude(kind=Kind.MESSAGE)
            .defer("embedding")
            .order_by("id")
        }
        named = {c.data.get("character") for c in changes if c.type == FeedType.MEMORY} - {None}
        wanted = named | {c.uid for c in changes if c.type == FeedType.CHARACTER and c.uid}
        self.characters = {
            c.uid: c
            for c in Character.objects.select_for_update().filter(user=self.user, uid__in=wanted).order_by("id")
        }
        chat_ids = {c.data.get("chat") for c in changes if c.type == FeedType.MEMORY} - {None}
        self.chats = {c.pk: c for c in Chat.objects.filter(user=self.user, pk__in=chat_ids)}
        through = Memory.entities.through.objects.filter(memory_id__in=[m.pk for m in self.memories.values()])
        for memory_id, name in through.values_list("memory_id", "entity__name"):
            self.entity_names.setdefault(memory_id, set()).add(name.lower())
        superseding = {c.data.get("superseded_by") for c in changes if c.type == FeedType.MEMORY} - {None}
        self.superseding = dict(
            Memory.objects.filter(user=self.user, uid__in=superseding)
            .exclude(kind=Kind.MESSAGE)
            .values_list("uid", "id")
        )
        self.preload_unavailable(changes)

    def preload_unavailable(self, changes: list[Change]) -> None:
        """The uids the push's creates name that are held by anything but this user's own synced objects."""
        held = {FeedType.MEMORY: (Memory, self.memories), FeedType.CHARACTER: (Character, self.characters)}
        for kind, (model, own) in held.items():
            created = {c.uid for c in changes if c.type == kind and c.op == "create"} - set(own)
            stored = set(model.objects.filter(uid__in=created).values_list("uid", flat=True))
            for uid in created:
                entry = self.entries.get((kind, uid))
                if uid in stored or (entry is not None and entry.user_id != self.user.pk):
                    self.unavailable.add((kind, uid))

    def check_available(self, change: Change) -> None:
        if change.op == "create" and (change.type, change.uid) in self.unavailable:
            raise ApplicationError(
                f"Change {change.index}: this uid cannot be used; give the object a new one.",
                {"field": f"changes[{change.index}].uid"},
                status=409,
                code="uid_unavailable",
            )

    def entry(self, kind: str, uid: UUID) -> FeedEntry | None:
        key = (kind, uid)
        if key not in self.entries:
            self.entries[key] = FeedEntry.objects.filter(type=kind, uid=uid).first()
        return self.entries[key]

    def lww_key(self, moment: datetime | None, by: str) -> tuple:
        """Last write wins: the later change, to the second; then the higher priority; then the greater key."""
        second = int(moment.timestamp()) if moment else 0
        name = by or clocks.SERVER
        return (second, self.priorities.get(name, 0), name)

    def incoming_wins(self, change: Change, changed_at: datetime | None, changed_by: str) -> bool:
        return self.lww_key(change.modified_at, self.key) > self.lww_key(changed_at, changed_by)

    def outcome(self, change: Change, uid: UUID, result: str, clock: dict, **extra: Any) -> Outcome:
        self.touched.add(uid)
        return Outcome(change.index, change.type, str(uid), result, clock, **extra)

    def current(self, kind: str, uid: UUID) -> dict[str, Any] | None:
        self.flush()
        entry = FeedEntry.objects.filter(user=self.user, type=kind, uid=uid).first()
        if entry is not None and entry.deleted_at is not None:
            return tombstone_payload(entry)
        return PAYLOADS[kind](user_id=self.user.pk, uids=[uid]).get(uid)

    def rejected(self, change: Change, uid: UUID, reason: str, clock: dict | None = None) -> Outcome:
        item = self.current(change.type, uid)
        return self.outcome(
            change,
            uid,
            REJECTED,
            clock if clock is not None else (item or {}).get("clock", {}),
            reason=reason,
            item=item,
        )

    def tombstone(self, kind: str, uid: UUID, clock: dict) -> None:
        """The uid's tombstone, as this instance's deletion (a delete trigger may have written it just now)."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sync_feed_tombstone(%s, %s, %s, %s::jsonb, %s)",
                [self.user.pk, kind, uid, json.dumps(clock), self.key],
            )
        FeedEntry.objects.filter(user=self.user, type=kind, uid=uid).update(deleted_by=self.key, clock=clock)
        self.entries[(kind, uid)] = FeedEntry.objects.get(type=kind, uid=uid)

    def tombstoned(self, kind: str, uid: UUID) -> bool:
        """Whether the uid is a tombstone, or another user's (never to be written here)."""
        entry = self.entry(kind, uid)
        return entry is not None and (entry.deleted_at is not None or entry.user_id != self.user.pk)

    def refused(self, change: Change, uid: UUID) -> Outcome:
        """The answer for a tombstoned uid. Another user's uid is answered as a uid nobody holds would be
        ("unknown"), so that an answer never tells whether someone else has it."""
        entry = self.entry(change.type, uid)
        if entry is not None and entry.user_id != self.user.pk:
            return self.rejected(change, uid, "unknown", clock={})
        return self.rejected(change, uid, "deleted")

    def created(self, kind: str, uid: UUID) -> None:
        """An object this push made: on the feed now (its trigger wrote the entry)."""
        self.entries.pop((kind, uid), None)

    def descending(self, clock: dict, stored: dict) -> dict:
        """`clock` if it descends from the stored one; else the merge of both, counted as this instance's write
        (so the new version's clock always descends from what was stored)."""
        if clocks.compare(clock, stored) is Order.AFTER:
            return clock
        return clocks.tick(clocks.merge(clock, stored), self.key)

    def participating(self, current: list[str]) -> list[str]:
        return current if self.key in current else [*current, self.key]


# --- memories -------------------------------------------------------------------------------------------------


def _memory_references(push: _Push, change: Change, memory: Memory | None) -> dict[str, Any] | str:
    """The character, chat and superseding memory a change names, as column values; or why it cannot be
    applied."""
    values: dict[str, Any] = {}
    data = change.data
    if "character" in data:
        character = push.characters.get(data["character"]) if data["character"] is not None else None
        if data["character"] is not None and character is None:
            return "character_missing"
        values["character_id"] = character.pk if character else None
    if "chat" in data:
        chat = push.chats.get(data["chat"]) if data["chat"] is not None else None
        if data["chat"] is not None and chat is None:
            return "chat_missing"
        values["chat_id"] = chat.pk if chat else None
    if "superseded_by" in data:
        other = push.superseding.get(data["superseded_by"]) if data["superseded_by"] is not None else None
        if data["superseded_by"] is not None and (other is None or (memory is not None and other == memory.pk)):
            return "superseded_by_missing"
        values["superseded_by_id"] = other
    character = values.get("character_id", memory.character_id if memory else None)
    chat = values.get("chat_id", memory.chat_id if memory else None)
    kind = data.get("kind", memory.kind if memory else None)
    if character is None and chat is None:
        return "no_scope"
    if kind in CHAT_ONLY_KINDS and chat is None:
        return "no_scope"
    return values


SYNC_COLUMNS = ["clock", "changed_at", "changed_by", "participating_instances", "edited_by", "version", "updated_at"]
VECTOR_COLUMNS = ["content_hash", "embedding", "embedding_model", "embedding_dim"]


def _memory_write(push: _Push, change: Change, memory: Memory, values: dict[str, Any], clock: dict) -> Memory:
    """Write the change's fields onto `memory` (new or stored) with `clock`, as the pushing instance's version;
    a stored one is updated in the columns that can change only (its vector stays unless the content moved)."""
    data = change.data
    columns = [name for name in MEMORY_WRITABLE if name in data] + list(values)
    for name in MEMORY_WRITABLE:
        if name in data:
            setattr(memory, name, data[name])
    for name, value in values.items():
        setattr(memory, name, value)
    if memory.kind == Kind.DAILY:
        memory.content = daily.daily_tag(memory.content, push.key)
        if "date" in data:
            memory.data = {**(memory.data or {}), "period": data["date"]}
            columns += ["content", "data"]
    memory.content = memory.content.strip()
    new_hash = text_hash(memory.content)
    if new_hash != memory.content_hash:
        memory.content_hash = new_hash
        memory.embedding, memory.embedding_model, memory.embedding_dim = None, "", None
        columns += VECTOR_COLUMNS
        push.embed = True
    if "participating_instances" in data:
        memory.participating_instances = list(dict.fromkeys(data["participating_instances"]))
    memory.participating_instances = push.participating(memory.participating_instances)
    memory.clock = clock
    memory.changed_at = change.modified_at
    memory.changed_by = push.key
    if change.op == "edit":
        memory.edited_by = push.key
    memory.updated_at = timezone.now()
    if memory.pk is None:
        memory.save()
        push.memories[memory.uid] = memory
        push.created(FeedType.MEMORY, memory.uid)
    else:
        memory.version += 1  # the row is locked: its version is the stored one
        push.write_later(memory, [*columns, *SYNC_COLUMNS])
    if "entities" in data:
        names = {str(e.get("name", "")).strip().lower() for e in data["entities"]}
        if names != push.entity_names.get(memory.pk, set()):
            entities = entities_ensure(user=push.user, character=memory.character, entities=data["entities"])
            memory.entities.set(entities)
            push.entity_names[memory.pk] = names
    return memory


def _daily_twin(push: _Push, change: Change, values: dict[str, Any]) -> Memory | None:
    """The instance's daily memory of that day and character, if it has one already (under another uid)."""
    push.flush()
    day = change.data.get("date") or (change.data.get("data") or {}).get("period")
    character = values.get("character_id")
    if not day or character is None:
        return None
    return (
        Memory.objects.select_for_update()
        .defer("embedding")
        .filter(
            user=push.user,
            character_id=character,
            kind=Kind.DAILY,
            status=Status.ACTIVE,
            source_instance=push.key,
            data__period=day,
        )
        .order_by("id")
        .first()
    )


def _merge_daily(push: _Push, change: Change, memory: Memory) -> Outcome:
    push.flush()
    clock = push.descending(clocks.merge(change.clock, memory.clock), memory.clock)
    merged = daily.daily_merge(memory.content, change.data.get("content", ""), push.key)
    if merged != memory.content:
        memory.content = merged
        memory.content_hash = text_hash(merged)
        memory.embedding, memory.embedding_model, memory.embedding_dim = None, "", None
        memory.changed_at = max(change.modified_at, memory.changed_at or change.modified_at)
        memory.changed_by = push.key
        push.embed = True
    memory.participating_instances = push.participating(memory.participating_instances)
    memory.clock = clock
    memory.save()
    return push.outcome(change, memory.uid, MERGED, clock, item=push.current(FeedType.MEMORY, memory.uid))


def _apply_memory(push: _Push, change: Change) -> Outcome:
    uid = change.uid
    push.check_available(change)
    if push.tombstoned(FeedType.MEMORY, uid):
        return push.refused(change, uid)
    memory = push.memories.get(uid)
    if memory is not None and push.entry(FeedType.MEMORY, uid) is None:
        return push.rejected(change, uid, "deleted")  # deleted, and its tombstone collected since
    if change.op == "delete":
        clock = clocks.merge(change.clock, memory.clock) if memory else change.clock
        if memory is not None:
            push.flush()
            Memory.objects.filter(pk=memory.pk).update(
                status=Status.RETIRED,
                retired_reason="deleted",
                version=F("version") + 1,
                clock=clock,
                changed_at=change.modified_at,
                changed_by=push.key,
            )
            push.memories.pop(uid, None)
        push.tombstone(FeedType.MEMORY, uid, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if memory is None and change.op != "create":
        return push.rejected(change, uid, "unknown", clock={})
    values = _memory_references(push, change, memory)
    if isinstance(values, str):
        return push.rejected(change, uid, values, clock=memory.clock if memory else {})
    if memory is None:
        if change.data.get("kind") == Kind.DAILY:
            twin = _daily_twin(push, change, values)
            if twin is not None:
                return _merge_daily(push, change, twin)
        chat = values.get("chat_id")
        fresh = Memory(user=push.user, uid=uid, source_instance=push.key, origin="sync", source_chat_id=chat)
        memory = _memory_write(push, change, fresh, values, change.clock)
        return push.outcome(change, uid, APPLIED, change.clock)
    order = clocks.compare(change.clock, memory.clock)
    if order is Order.EQUAL:  # this version is the stored one: a retry
        return push.outcome(change, uid, APPLIED, memory.clock)
    merged = push.descending(clocks.merge(change.clock, memory.clock), memory.clock)
    if change.op == "edit":  # a person's correction overwrites, whatever the clocks say
        _memory_write(push, change, memory, values, merged)
        return push.outcome(change, uid, APPLIED, merged)
    if order is Order.AFTER:
        _memory_write(push, change, memory, values, change.clock)
        return push.outcome(change, uid, APPLIED, change.clock)
    if order is Order.BEFORE:
        return push.rejected(change, uid, "stale")
    if memory.kind == Kind.DAILY and change.data.get("kind", Kind.DAILY) == Kind.DAILY:
        return _merge_daily(push, change, memory)
    if memory.kind in AUTHORITATIVE_KINDS or push.incoming_wins(change, memory.changed_at, memory.changed_by):
        _memory_write(push, change, memory, values, merged)
        return push.outcome(change, uid, RESOLVED, merged, winner="incoming")
    push.flush()
    Memory.objects.filter(pk=memory.pk).update(clock=merged)
    memory.clock = merged
    return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.MEMORY, uid))


# --- identity documents: characters and settings ---------------------------------------------------------------


def _apply_character(push: _Push, change: Change) -> Outcome:
    uid = change.uid
    push.check_available(change)
    if push.tombstoned(FeedType.CHARACTER, uid):
        return push.refused(change, uid)
    character = push.characters.get(uid)
    if change.op == "delete":
        clock = clocks.merge(change.clock, character.clock) if character else change.clock
        if character is not None:
            push.flush()
            character.delete()  # its persistent memories go with it, each leaving a tombstone
            push.characters.pop(uid, None)
            push.memories = {k: m for k, m in push.memories.items() if m.character_id != character.pk}
        push.tombstone(FeedType.CHARACTER, uid, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if character is None:
        if change.op != "create":
            return push.rejected(change, uid, "unknown", clock={})
        character = Character(user=push.user, uid=uid, source_instance=push.key)
        _character_write(push, change, character, change.clock)
        return push.outcome(change, uid, APPLIED, change.clock)
    order = clocks.compare(change.clock, character.clock)
    if order is Order.EQUAL:
        return push.outcome(change, uid, APPLIED, character.clock)
    merged = push.descending(clocks.merge(change.clock, character.clock), character.clock)
    if change.op == "edit" or order is Order.AFTER:
        clock = merged if change.op == "edit" else change.clock
        _character_write(push, change, character, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if order is Order.BEFORE:
        return push.rejected(change, uid, "stale")
    if push.incoming_wins(change, character.changed_at, character.changed_by):
        _character_write(push, change, character, merged)
        return push.outcome(change, uid, RESOLVED, merged, winner="incoming")
    Character.objects.filter(pk=character.pk).update(clock=merged)
    character.clock = merged
    return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.CHARACTER, uid))


def _character_write(push: _Push, change: Change, character: Character, clock: dict) -> None:
    for name in CHARACTER_FIELDS:
        if name in change.data:
            setattr(character, name, change.data[name])
    if not character.name:
        raise ApplicationError("A character needs a name.", {"field": f"changes[{change.index}].data.name"})
    character.participating_instances = push.participating(character.participating_instances)
    character.clock = clock
    character.changed_at = change.modified_at
    character.changed_by = push.key
    created = character.pk is None
    character.save()
    push.characters[character.uid] = character
    if created:
        push.created(FeedType.CHARACTER, character.uid)


def _apply_settings(push: _Push, change: Change) -> Outcome:
    settings_get(user=push.user)
    document = SettingsDocument.objects.select_for_update().get(user=push.user)
    uid = document.uid
    order = clocks.compare(change.clock, document.clock)
    if order is Order.EQUAL:
        return push.outcome(change, uid, APPLIED, document.clock)
    merged = push.descending(clocks.merge(change.clock, document.clock), document.clock)
    resolved = order is Order.CONCURRENT and change.op != "edit"
    if order is Order.BEFORE and change.op != "edit":
        return push.rejected(change, uid, "stale")
    if resolved and not push.incoming_wins(change, document.changed_at, document.changed_by):
        SettingsDocument.objects.filter(pk=document.pk).update(clock=merged)
        return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.SETTINGS, uid))
    clock = change.clock if order is Order.AFTER and change.op != "edit" else merged
    document.data = change.data["document"]
    document.integrity = uuid_module.uuid4()  # the document changed: a Luker-style If-Match must see it
    document.participating_instances = push.participating(document.participating_instances)
    document.clock = clock
    document.changed_at = change.modified_at
    document.changed_by = push.key
    document.save()
    if resolved:
        return push.outcome(change, uid, RESOLVED, clock, winner="incoming")
    return push.outcome(change, uid, APPLIED, clock)


APPLY = {FeedType.MEMORY: _apply_memory, FeedType.CHARACTER: _apply_character, FeedType.SETTINGS: _apply_settings}


def push_entities(datas: Iterable[dict[str, Any]]) -> int:
    """How many entities the `data` of a push's changes name."""
    return sum(len(data.get("entities") or []) for data in datas)


def _uid_clash(exc: IntegrityError) -> bool:
    """A unique violation of an object's uid (its table's, or the feed's one entry per object)."""
    cause = exc.__cause__
    constraint = getattr(getattr(cause, "diag", None), "constraint_name", None) or ""
    return getattr(cause, "sqlstate", None) == "23505" and ("uid" in constraint or constraint == FEED_CONSTRAINT)


@transaction.atomic
def sync_push(*, user: AbstractUser, instance: Instance, changes: list[Change]) -> Pushed:
    """Apply `changes` in order, all or none (a change that cannot be applied by the rules is answered
    `rejected`, not an error; bad input is an ApplicationError naming the change and nothing is stored).

    The answer's cursor moves the instance past its own changes when nothing else reached the feed since its
    cursor; otherwise it stays, and the next pull brings the rest."""
    if len(changes) > MAX_CHANGES:
        raise ApplicationError(f"At most {MAX_CHANGES} changes per push.", {"field": "changes"})
    if push_entities(c.data for c in changes) > MAX_PUSH_ENTITIES:
        raise ApplicationError(
            f"At most {MAX_PUSH_ENTITIES} entities per push: send fewer changes at a time.", {"field": "changes"}
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [PUSH_LOCK, user.pk])
    push = _Push(user, instance)
    try:
        push.preload(changes)
        now = timezone.now()
        outcomes = []
        for change in changes:
            change.modified_at = min(change.modified_at, now + timedelta(seconds=1))  # a client's clock ahead of ours
            outcomes.append(APPLY[change.type](push, change))
        push.flush()
    except IntegrityError as exc:
        # Another account committed the same uid after the preload looked (its push holds its own lock, not ours).
        if not _uid_clash(exc):
            raise
        raise ApplicationError(
            "A uid in this push was taken meanwhile; give the object a new one.",
            {"field": "changes"},
            status=409,
            code="uid_unavailable",
        ) from exc
    if push.embed:
        embed_later(user_id=user.pk)
    feed_order(user_id=user.pk)
    head = feed_head(user_id=user.pk)
    cursor = instance.pulled_seq
    others = (
        FeedEntry.objects.filter(user=user, seq__gt=instance.pulled_seq, seq__lte=head)
        .exclude(uid__in=push.touched)
        .exists()
    )
    if not others:
        cursor = head
    Instance.objects.filter(pk=instance.pk).update(
        pulled_seq=max(instance.pulled_seq, cursor),
        pushed_items=F("pushed_items") + len(changes),
        last_push_at=now,
    )
    instance.refresh_from_db()
    return Pushed(outcomes, cursor)
