"""One push's working state: what it read (locked), what it will write, and the rules a change is judged by
against the stored version: clock order, and last write wins (apps.sync.clocks.lww_key) between concurrent ones."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import AbstractUser
from django.db import connection

from apps.chats.models import Character, Chat
from apps.common.exceptions import ApplicationError
from apps.lorebooks.models import Lorebook
from apps.memories.models import Kind, Memory
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedEntry, FeedType, Instance
from apps.sync.services.feed import PAYLOADS, tombstone_payload
from apps.sync.services.push.changes import REJECTED, Change, Outcome


class Push:
    """One push: the user, the pushing instance, and the priorities of all the user's instances (for ties)."""

    def __init__(self, user: AbstractUser, instance: Instance) -> None:
        self.user = user
        self.instance = instance
        self.key = instance.key
        self.priorities = dict(Instance.objects.filter(user=user).values_list("key", "priority"))
        self.touched: set[UUID] = set()
        self.embed = False  # some content changed: new vectors are due (one task for the whole push)
        self.books_written: set[UUID] = set()  # books a change of this push has written
        self.entries: dict[tuple[str, UUID], FeedEntry | None] = {}
        self.memories: dict[UUID, Memory] = {}
        self.characters: dict[UUID, Character] = {}
        self.lorebooks: dict[UUID, Lorebook] = {}
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
        self.lorebooks = {
            book.uid: book
            for book in Lorebook.objects.select_for_update()
            .filter(user=self.user, uid__in={c.uid for c in changes if c.type == FeedType.LOREBOOK and c.uid})
            .order_by("id")
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
        held = {
            FeedType.MEMORY: (Memory, self.memories),
            FeedType.CHARACTER: (Character, self.characters),
            FeedType.LOREBOOK: (Lorebook, self.lorebooks),
        }
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

    def incoming_wins(self, change: Change, changed_at: datetime | None, changed_by: str) -> bool:
        """Whether the change wins, by last write wins, over the stored version written at `changed_at` by
        `changed_by` (their clocks are concurrent)."""
        incoming = clocks.lww_key(change.modified_at, self.key, self.priorities)
        return incoming > clocks.lww_key(changed_at, changed_by, self.priorities)

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
