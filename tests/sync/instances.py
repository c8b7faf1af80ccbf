"""Helpers for the multi-instance sync tests: changes as an instance would push them, pulls to the end."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.sync.services.feed import sync_pull
from apps.sync.services.instances import instance_register
from apps.sync.services.push.apply import sync_push
from apps.sync.services.push.changes import Change, Outcome

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def change(
    op: str,
    uid: uuid.UUID | str | None = None,
    clock: dict[str, int] | None = None,
    *,
    type: str = "memory",
    when: datetime | None = None,
    **data: Any,
) -> Change:
    return Change(
        index=0,
        type=type,
        op=op,
        uid=uuid.UUID(str(uid)) if uid else None,
        clock=clock or {},
        modified_at=when or datetime.now(UTC),
        data=data,
    )


def push(user, key: str, *changes: Change) -> list[Outcome]:
    instance, _ = instance_register(user=user, key=key)
    for index, item in enumerate(changes):
        item.index = index
    return sync_push(user=user, instance=instance, changes=list(changes)).outcomes


def pull(user, key: str, cursor: int | None = None, limit: int = 500) -> tuple[list[dict], int]:
    """Everything past `cursor`, every page."""
    instance, _ = instance_register(user=user, key=key)
    items: list[dict] = []
    while True:
        page = sync_pull(user=user, instance=instance, cursor=cursor, limit=limit)
        items += page.items
        cursor = page.cursor
        if not page.has_more:
            return items, cursor


def of(items: list[dict], uid) -> list[dict]:
    return [item for item in items if item["uid"] == str(uid)]
