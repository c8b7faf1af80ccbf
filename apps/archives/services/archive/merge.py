"""An archive import's state, and the rules it merges every archived object by (the sync rules of
apps/sync/services/push/): the uid an object has here, and which version wins. The import's steps
(apps/archives/services/archive/importing.py and the import_*.py modules beside it) read and fill it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractUser

from apps.archives.services.archive.format import ArchiveError, Progress
from apps.archives.services.archive.reader import ArchiveReader
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedEntry, Instance

ARCHIVE_NAMESPACE = uuid.UUID("5f0c6e3a-8a4e-4f3b-9a57-6b1f2d0c7e11")


def archived_uid(value: Any, *, file: str, line: int, field: str = "uid") -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError) as exc:
        raise ArchiveError(f"{field} is not a uuid", file=file, line=line) from exc


class ArchiveImport:
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
        self.files: list = []  # (storage, name) of the pictures stored: deleted should the import roll back
        self.chats: dict[str, int] = {}  # archive uid → chat id here
        self.uids: dict[uuid.UUID, uuid.UUID] = {}  # a memory's archive uid → its uid here
        self.entity_ids: dict[tuple[int | None, str], int] = {}  # (character id, lower-cased name) → entity id
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
        merged = clocks.merge(clock, stored.clock)
        archived = clocks.lww_key(changed_at, by, self.priorities)
        kept = clocks.lww_key(stored.changed_at, stored.changed_by, self.priorities)
        return ("archive" if archived > kept else "stored"), merged
