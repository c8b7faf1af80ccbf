"""One scope of a user's memories (a character's persistent ones, or one chat's), the unit the lifecycle
classifies, decays and consolidates within, with a lock that serialises that work."""

from __future__ import annotations

import zlib
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Q

from apps.memories.models import Kind

LONG_TERM_KINDS = (Kind.FACT, Kind.RELATIONSHIP, Kind.PREFERENCE, Kind.EVENT)
SESSION_KINDS = (Kind.SCENE, Kind.REVELATION, Kind.DEVELOPMENT, Kind.DETAIL)
# Kinds whose candidates are deduplicated against each other. Summaries, profiles, canon and the periods of the
# hierarchy are written whole by their producers; messages follow their chat.
DEDUP_KINDS = (*LONG_TERM_KINDS, *SESSION_KINDS, Kind.ARC, Kind.STATE, Kind.EPISTEMIC, Kind.SIGNIFICANT)
_LOCK_CLASS = zlib.crc32(b"lorekeeper-lifecycle-scope") & 0x7FFFFFFF


@dataclass(frozen=True)
class ScopeKey:
    user_id: int
    character_id: int | None
    chat_id: int | None

    def q(self, prefix: str = "") -> Q:
        if self.chat_id is not None:
            return Q(**{f"{prefix}user_id": self.user_id, f"{prefix}chat_id": self.chat_id})
        return Q(
            **{
                f"{prefix}user_id": self.user_id,
                f"{prefix}character_id": self.character_id,
                f"{prefix}chat__isnull": True,
            }
        )

    def sql(self) -> tuple[str, list]:
        if self.chat_id is not None:
            return "m.user_id = %s AND m.chat_id = %s", [self.user_id, self.chat_id]
        return "m.user_id = %s AND m.character_id = %s AND m.chat_id IS NULL", [self.user_id, self.character_id]

    @property
    def lock_id(self) -> int:
        # Chats and characters share the key space by sign; ids beyond 2^31 would wrap, harmlessly (a shared lock).
        value = -self.chat_id if self.chat_id is not None else self.character_id
        return ((value + 2**31) % 2**32) - 2**31

    @classmethod
    def of(cls, memory) -> ScopeKey:
        if memory.chat_id is not None:
            return cls(memory.user_id, None, memory.chat_id)
        return cls(memory.user_id, memory.character_id, None)


@contextmanager
def scope_locked(scope: ScopeKey):
    """A session-level advisory lock: held across the model's answer, which no transaction should wait for, so
    two workers never classify into one scope at once (each would miss the other's duplicate)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [_LOCK_CLASS, scope.lock_id])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, scope.lock_id])


def lifecycle_config() -> dict:
    return settings.LOREKEEPER_LIFECYCLE


def thresholds(profile: str) -> dict:
    table = lifecycle_config()["thresholds"]
    return table.get(profile) or table["B"]
