"""Importing an account archive (apps/archives/services/archive/__init__.py says what it holds and how it merges):
the steps in order, in one transaction, and the last of them, the settings and the tombstones. The characters and
chats are merged by apps/archives/services/archive/import_chats.py, the entities and memories by
apps/archives/services/archive/import_memories.py."""

from __future__ import annotations

import json
import uuid
from typing import Any, BinaryIO

from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction

from apps.accounts.models import SettingsDocument
from apps.accounts.services import settings_document_get
from apps.archives.services.archive.decisions import decisions_in
from apps.archives.services.archive.format import Progress, quiet
from apps.archives.services.archive.import_chats import characters_in, chats_in
from apps.archives.services.archive.import_lorebooks import lorebooks_in
from apps.archives.services.archive.import_memories import entities_in, memories_in
from apps.archives.services.archive.merge import ArchiveImport
from apps.archives.services.archive.reader import ArchiveReader
from apps.archives.services.archive.records import SettingsRecordSerializer, TombstoneRecordSerializer, record_check
from apps.chats.models import Character
from apps.lorebooks.models import Lorebook
from apps.memories.models import Memory, Status
from apps.memories.services.memories import embed_later
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedType


def _settings_in(job: ArchiveImport) -> None:
    name = "settings.json"
    raw = job.archive.json(name)
    if raw is None:
        return
    record = record_check(SettingsRecordSerializer, raw, file=name, line=1)
    settings_document_get(user=job.user)
    stored = SettingsDocument.objects.select_for_update().get(user=job.user)
    side, kept = job.winner(record["clock"], record["changed_at"], record["changed_by"], stored)
    if side == "archive":
        stored.data, stored.clock, stored.changed_at = record["document"], kept, record["changed_at"]
        stored.changed_by = record["changed_by"]
        stored.integrity = uuid.uuid4()
        stored.save()
        job.counts["settings"] = {"updated": 1}
    else:
        if kept != stored.clock:
            SettingsDocument.objects.filter(pk=stored.pk).update(clock=kept)
        job.counts["settings"] = {"kept": 1}


# What an archive's tombstones delete here: a memory is retired, the others deleted.
TOMBSTONED = {FeedType.MEMORY: Memory, FeedType.CHARACTER: Character, FeedType.LOREBOOK: Lorebook}


def _tombstones_in(job: ArchiveImport) -> None:
    """What the archive's account deleted stays deleted here (a restore brings those back instead)."""
    if job.restore:
        return
    name = "tombstones.jsonl"
    for number, row in job.archive.lines(name):
        record = record_check(TombstoneRecordSerializer, row, file=name, line=number)
        kind = record["type"]
        model = TOMBSTONED.get(kind)
        if model is None:
            continue
        uid = job.local(model, record["uid"])
        clock = record["clock"]
        target = model.objects.filter(user=job.user, uid=uid).first()
        if target is not None and clocks.compare(target.clock, clock) is Order.AFTER:
            continue  # changed here after the deletion it saw: kept
        if target is not None and kind != FeedType.MEMORY:
            target.delete()
        elif target is not None and target.status == Status.ACTIVE:
            Memory.objects.filter(pk=target.pk).update(status=Status.RETIRED, retired_reason="deleted")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sync_feed_tombstone(%s, %s, %s, %s::jsonb, %s)",
                [job.user.pk, kind, uid, json.dumps(clock), record["deleted_by"]],
            )
        job.count("tombstones", "applied")


def archive_import(
    *, user: AbstractUser, source: BinaryIO, restore: bool = False, progress: Progress = quiet
) -> dict[str, Any]:
    """Merge an archive into the account (see apps/archives/services/archive/__init__.py); `restore` also brings back
    what was deleted since. All or nothing: every line is checked as the API checks what it stores, every member
    streamed and counted against LOREKEEPER_MAX_ARCHIVE_BYTES (apps/archives/services/archive/reader.py). Returns what
    happened, by kind."""
    archive = ArchiveReader(source)
    job = ArchiveImport(user, archive, restore, progress)
    try:
        _steps(job)
    except BaseException:
        for storage, name in job.files:  # pictures stored for rows the failed import rolled back
            storage.delete(name)
        raise
    progress("done", 100)
    return job.counts


def _steps(job: ArchiveImport) -> None:
    """The import's steps, in order, in one transaction."""
    user, progress = job.user, job.progress
    with transaction.atomic():
        progress("characters", 5)
        characters_in(job)
        chats_in(job)
        progress("entities", 50)
        entities_in(job)
        memories_in(job)
        decisions_in(job)
        progress("lorebooks", 90)
        lorebooks_in(job)
        progress("settings", 95)
        _settings_in(job)
        _tombstones_in(job)
        if job.embed:
            embed_later(user_id=user.pk)
