"""What a push carries and answers: its changes (their shape checked by ChangeSerializer in
apps/sync/apis/instances.py, their number here) and each change's outcome."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from apps.common.exceptions import ApplicationError

MAX_CHANGES = 1000
# Entities named across a push's memories (at most 50 each): each costs queries while the user's push lock is held.
MAX_PUSH_ENTITIES = 2000
# Lorebook entries across a push's books (a book holds at most 10,000): each is checked and written under the lock.
MAX_PUSH_LOREBOOK_ENTRIES = 20_000

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


def push_entities(datas: Iterable[dict[str, Any]]) -> int:
    """How many entities the `data` of a push's changes name."""
    return sum(len(data.get("entities") or []) for data in datas)


def push_lorebook_entries(datas: Iterable[dict[str, Any]]) -> int:
    """How many lorebook entries the `data` of a push's changes carry."""
    books = [data.get("book") for data in datas]
    entries = [book.get("entries") for book in books if isinstance(book, dict)]
    return sum(len(each) for each in entries if isinstance(each, dict | list))


def changes_check(changes: list[Change]) -> None:
    """Refuse a push too large to apply while the user's push lock is held."""
    if len(changes) > MAX_CHANGES:
        raise ApplicationError(f"At most {MAX_CHANGES} changes per push.", {"field": "changes"})
    if push_entities(c.data for c in changes) > MAX_PUSH_ENTITIES:
        raise ApplicationError(
            f"At most {MAX_PUSH_ENTITIES} entities per push: send fewer changes at a time.", {"field": "changes"}
        )
    if push_lorebook_entries(c.data for c in changes) > MAX_PUSH_LOREBOOK_ENTRIES:
        raise ApplicationError(
            f"At most {MAX_PUSH_LOREBOOK_ENTRIES:,} lorebook entries per push: send fewer books at a time.",
            {"field": "changes"},
        )
