"""The sync feed: what a pull reads. Every synced object of a user (memories other than message memories,
characters, lorebooks, the settings document) has one FeedEntry, kept by database triggers (migrations sync 0004
and 0011); a change puts it back on the feed unordered, and a pull numbers what is unordered before it reads past
its cursor.

Why number at read time: a sequence value taken when a change is written could be overtaken by a later one that
commits first, and a cursor that passed it would never see it. Here only committed rows are numbered, under one
lock per user, so every change committed after a pull gets a higher number than anything that pull returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.accounts.models import SettingsDocument
from apps.chats.models import Character
from apps.chats.services.characters import CHARACTER_FIELDS as CARD_FIELDS
from apps.lorebooks.models import Lorebook, LorebookEntry
from apps.memories.models import Memory
from apps.sync.models import FeedEntry, FeedType, Instance

FEED_LOCK = 0x5346  # pg_advisory_xact_lock(FEED_LOCK, user id): numbering the user's feed
PULL_LIMIT = 500
MAX_PULL_LIMIT = 2000

# What an instance may write of a memory (push applies these), and what a pulled memory carries besides.
MEMORY_WRITABLE = (
    "kind",
    "content",
    "data",
    "importance",
    "confidence",
    "time_scope",
    "valid_from",
    "valid_to",
    "status",
    "retired_reason",
    "occurred_at",
)
MEMORY_FIELDS = (
    *MEMORY_WRITABLE,
    "source_instance",
    "participating_instances",
    "edited_by",
    "origin",
    "version",
    "created_at",
)
CHARACTER_FIELDS = (*CARD_FIELDS, "source_instance", "participating_instances")
LOREBOOK_FIELDS = ("name", "scope", "source_instance", "participating_instances")


def feed_order(*, user_id: int) -> None:
    """Number the user's committed, unordered feed entries. Rows a running transaction holds are left for the
    next pull (SKIP LOCKED): they are not committed yet, or are about to change again."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [FEED_LOCK, user_id])
        cursor.execute(
            """
            UPDATE sync_feedentry f SET seq = nextval('sync_feed_seq')
            FROM (
                SELECT id FROM sync_feedentry WHERE user_id = %s AND seq IS NULL ORDER BY id FOR UPDATE SKIP LOCKED
            ) todo
            WHERE f.id = todo.id
            """,
            [user_id],
        )


def feed_head(*, user_id: int) -> int:
    """The highest number on the user's feed (0 when empty)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(seq), 0) FROM sync_feedentry WHERE user_id = %s", [user_id])
        return int(cursor.fetchone()[0])


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _daily_key(memory: dict[str, Any]) -> str | None:
    """entity-core's file name (docs/GLOSSARY.md) of a daily memory: `YYYY-MM-DD_instance` (the server's own:
    `YYYY-MM-DD`)."""
    period = (memory.get("data") or {}).get("period")
    if memory["kind"] != "daily" or not isinstance(period, str):
        return None
    return f"{period}_{memory['source_instance']}" if memory["source_instance"] else period


def memory_payloads(*, user_id: int, uids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    rows = list(
        Memory.objects.filter(user_id=user_id, uid__in=uids)
        .exclude(kind="message")
        .values(
            "id",
            "uid",
            "clock",
            "changed_at",
            "changed_by",
            "chat_id",
            "character__uid",
            "superseded_by__uid",
            *MEMORY_FIELDS,
        )
    )
    ids = [row["id"] for row in rows]
    contradicts: dict[int, list[str]] = {}
    for from_id, other in Memory.contradicts.through.objects.filter(from_memory_id__in=ids).values_list(
        "from_memory_id", "to_memory__uid"
    ):
        contradicts.setdefault(from_id, []).append(str(other))
    entities: dict[int, list[dict[str, Any]]] = {}
    for memory_id, name, kind, aliases in Memory.entities.through.objects.filter(memory_id__in=ids).values_list(
        "memory_id", "entity__name", "entity__type", "entity__aliases"
    ):
        entities.setdefault(memory_id, []).append({"name": name, "type": kind, "aliases": aliases})
    payloads = {}
    for row in rows:
        data = {field: row[field] for field in MEMORY_FIELDS}
        data["occurred_at"] = _iso(data["occurred_at"])
        data["created_at"] = _iso(data["created_at"])
        data |= {
            "character": str(row["character__uid"]) if row["character__uid"] else None,
            "chat": row["chat_id"],
            "superseded_by": str(row["superseded_by__uid"]) if row["superseded_by__uid"] else None,
            "contradicts": sorted(contradicts.get(row["id"], [])),
            "entities": sorted(entities.get(row["id"], []), key=lambda e: e["name"].lower()),
            "key": _daily_key(row),
        }
        payloads[row["uid"]] = _item(FeedType.MEMORY, row, data)
    return payloads


def character_payloads(*, user_id: int, uids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    rows = Character.objects.filter(user_id=user_id, uid__in=uids).values(
        "id", "uid", "clock", "changed_at", "changed_by", *CHARACTER_FIELDS
    )
    return {row["uid"]: _item(FeedType.CHARACTER, row, {f: row[f] for f in ("id", *CHARACTER_FIELDS)}) for row in rows}


def settings_payloads(*, user_id: int, uids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    rows = SettingsDocument.objects.filter(user_id=user_id, uid__in=uids).values(
        "uid", "clock", "changed_at", "changed_by", "data", "integrity", "source_instance", "participating_instances"
    )
    return {
        row["uid"]: _item(
            FeedType.SETTINGS,
            row,
            {
                "document": row["data"],
                "integrity": str(row["integrity"]),
                "source_instance": row["source_instance"],
                "participating_instances": row["participating_instances"],
            },
        )
        for row in rows
    }


def lorebook_payloads(*, user_id: int, uids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """Each book whole: its name, scope and the World Info file SillyTavern loads (its entries read in one query
    for all the books)."""
    rows = list(
        Lorebook.objects.filter(user_id=user_id, uid__in=uids).values(
            "id", "uid", "clock", "changed_at", "changed_by", "extra", *LOREBOOK_FIELDS
        )
    )
    entries: dict[int, dict[str, Any]] = {row["id"]: {} for row in rows}
    for book_id, uid, data in (
        LorebookEntry.objects.filter(lorebook_id__in=entries)
        .order_by("lorebook_id", "uid")
        .values_list("lorebook_id", "uid", "data")
    ):
        entries[book_id][str(uid)] = data
    return {
        row["uid"]: _item(
            FeedType.LOREBOOK,
            row,
            {
                **{field: row[field] for field in LOREBOOK_FIELDS},
                "book": {**row["extra"], "entries": entries[row["id"]]},
            },
        )
        for row in rows
    }


PAYLOADS = {
    FeedType.MEMORY: memory_payloads,
    FeedType.CHARACTER: character_payloads,
    FeedType.SETTINGS: settings_payloads,
    FeedType.LOREBOOK: lorebook_payloads,
}


def _item(kind: str, row: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": kind,
        "uid": str(row["uid"]),
        "deleted": False,
        "clock": row["clock"],
        "changed_at": _iso(row["changed_at"]),
        "changed_by": row["changed_by"],
        "data": data,
    }


def tombstone_payload(entry: FeedEntry) -> dict[str, Any]:
    return {
        "type": entry.type,
        "uid": str(entry.uid),
        "deleted": True,
        "clock": entry.clock,
        "deleted_at": _iso(entry.deleted_at),
        "deleted_by": entry.deleted_by,
    }


def feed_items(*, user_id: int, entries: list[FeedEntry]) -> list[dict[str, Any]]:
    """The entries as pull items, in feed order; an object gone since its entry was read is left out (its
    tombstone is on the feed, after)."""
    live: dict[str, list[UUID]] = {}
    for entry in entries:
        if entry.deleted_at is None:
            live.setdefault(entry.type, []).append(entry.uid)
    found: dict[UUID, dict[str, Any]] = {}
    for kind, uids in live.items():
        found |= PAYLOADS[kind](user_id=user_id, uids=uids)
    items = []
    for entry in entries:
        item = tombstone_payload(entry) if entry.deleted_at is not None else found.get(entry.uid)
        if item is not None:
            items.append({**item, "seq": entry.seq})
    return items


@dataclass
class Pulled:
    items: list[dict[str, Any]]
    cursor: int
    has_more: bool
    head: int


@transaction.atomic
def sync_pull(*, user: AbstractUser, instance: Instance, cursor: int | None, limit: int = PULL_LIMIT) -> Pulled:
    """Everything on the user's feed past `cursor` (none: from the start, a full pull, tombstones included), at
    most `limit` items in feed order; the new cursor is the last item's number. The instance's own cursor moves
    forward with it (tombstones are collected once every instance is past them)."""
    limit = max(1, min(int(limit), MAX_PULL_LIMIT))
    cursor = max(0, int(cursor or 0))
    feed_order(user_id=user.pk)
    entries = list(FeedEntry.objects.filter(user=user, seq__gt=cursor).order_by("seq")[: limit + 1])
    has_more = len(entries) > limit
    entries = entries[:limit]
    items = feed_items(user_id=user.pk, entries=entries)
    new_cursor = entries[-1].seq if entries else cursor
    head = feed_head(user_id=user.pk)
    Instance.objects.filter(pk=instance.pk).update(
        pulled_seq=Greatest("pulled_seq", Value(new_cursor)),
        pulled_items=F("pulled_items") + len(items),
        last_pull_at=timezone.now(),
    )
    instance.refresh_from_db()
    return Pulled(items=items, cursor=new_cursor, has_more=has_more, head=head)


def tombstones_collect() -> int:
    """Delete the tombstones every instance of their user has pulled past (all of them, for a user with no
    instances: a new instance starts with a full pull, which needs none). Returns how many went."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            DELETE FROM sync_feedentry f
            WHERE f.deleted_at IS NOT NULL AND (
                NOT EXISTS (SELECT 1 FROM sync_instance i WHERE i.user_id = f.user_id)
                OR f.seq <= (SELECT min(i.pulled_seq) FROM sync_instance i WHERE i.user_id = f.user_id)
            )
            """
        )
        return cursor.rowcount


def feed_revive(*, user_id: int, kind: str, uid: UUID) -> None:
    """A deleted object brought back by its owner (a memory restored on the memory page): its tombstone goes,
    and the object goes back on the feed as it is now."""
    FeedEntry.objects.filter(user_id=user_id, type=kind, uid=uid).update(deleted_at=None, deleted_by="", seq=None)
