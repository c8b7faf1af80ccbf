"""Vector clocks (entity-core's, docs/GLOSSARY.md): `{instance key: counter}`, a missing key counting 0."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from apps.common.jsonsafe import text_storable

SERVER = "server"  # the key the server's own writes count under
MAX_KEYS = 100


class Order(Enum):
    EQUAL = "equal"
    AFTER = "after"  # the first includes everything the second does, and more: it descends from it
    BEFORE = "before"
    CONCURRENT = "concurrent"  # each has a change the other has not seen: a conflict


def compare(a: dict[str, int], b: dict[str, int]) -> Order:
    ahead = behind = False
    for key in a.keys() | b.keys():
        x, y = int(a.get(key, 0)), int(b.get(key, 0))
        ahead |= x > y
        behind |= x < y
    if ahead and behind:
        return Order.CONCURRENT
    if ahead:
        return Order.AFTER
    if behind:
        return Order.BEFORE
    return Order.EQUAL


def merge(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """The least clock that descends from both."""
    return {key: max(int(a.get(key, 0)), int(b.get(key, 0))) for key in sorted(a.keys() | b.keys())}


def tick(clock: dict[str, int], key: str) -> dict[str, int]:
    return {**clock, key: int(clock.get(key, 0)) + 1}


def lww_key(changed_at: datetime | None, changed_by: str, priorities: Mapping[str, int]) -> tuple[int, int, str]:
    """Last write wins, for two versions of one object whose clocks are concurrent: the greater key wins. The later
    write, to the second; then the writing instance's priority (`priorities`: instance key → priority, 0 when
    missing); then the greater instance key. A write with no author counts as the server's. The one rule for a
    push (apps/sync/services/push/) and for an account archive's import."""
    second = int(changed_at.timestamp()) if changed_at else 0
    name = changed_by or SERVER
    return (second, priorities.get(name, 0), name)


def clock_problem(value: Any) -> str | None:
    """Why `value` is not a clock, or None."""
    if not isinstance(value, dict):
        return "a clock is an object of instance keys and counters"
    if len(value) > MAX_KEYS:
        return f"a clock has at most {MAX_KEYS} instances"
    for key, count in value.items():
        if not isinstance(key, str) or not key or len(key) > 64 or not text_storable(key):
            return "a clock's keys are instance keys of 1 to 64 characters (no NUL, no lone surrogate)"
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or count > 2**53:
            return f"the counter of {key!r} is a whole number from 0"
    return None
