"""The lorebooks of an account archive (apps/archives/services/archive/__init__.py): each book from its line in
lorebooks.jsonl and its entries from its own file, every entry checked as a World Info import checks it
(apps/lorebooks/services/fields.py). A book merges by its clock as a character does (merge.py `winner`): the
version that descends from the other is kept, a conflict goes to the later write. A book deleted here stays
deleted, unless the import is a restore. A restore brings the archive's version back and keeps one holding changes
the archive lacks beside it, as "<name> (before restore)". A book whose name another book here holds comes in as
"<name> (2)". Nothing is lost.

An archive written before books carried clocks has none on its lines: there the later `updated_at` wins."""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.merge import ArchiveImport, archived_uid
from apps.archives.services.archive.records import LorebookRecordSerializer, record_check
from apps.common.exceptions import ApplicationError
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import MAX_NAME, lorebook_export, lorebook_put
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedEntry, FeedType
from apps.sync.services.feed import feed_revive

INDEX = "lorebooks.jsonl"


def _entries(job: ArchiveImport, path: str) -> list[dict]:
    if job.archive.member(path) is None:
        raise ArchiveError("the book's entries are missing from the archive", file=path)
    return [row for _, row in job.archive.lines(path)]


def _side(job: ArchiveImport, record: dict[str, Any], stored: Lorebook) -> tuple[str, dict, bool]:
    """Which version wins ("archive", "stored" or "same"), the clock the book keeps, and whether the stored one
    holds changes the archive lacks (a restore keeps it beside)."""
    if not record["clock"]:  # written before books carried clocks: the archive's version is a server write
        if stored.updated_at == record["updated_at"]:
            return "same", stored.clock, False
        if stored.updated_at > record["updated_at"]:
            return "stored", stored.clock, True
        return "archive", clocks.tick(stored.clock, clocks.SERVER), False
    side, clock = job.winner(record["clock"], record["changed_at"], record["changed_by"], stored)
    return side, clock, clocks.compare(stored.clock, record["clock"]) not in (Order.BEFORE, Order.EQUAL)


def _put(job: ArchiveImport, record: dict[str, Any], uid: uuid.UUID, entries: list[dict], *, number: int) -> str:
    """The archive's version written under `uid`; what the book import refuses names the file and line."""
    path = record["file"]
    try:
        _, outcome = lorebook_put(
            user=job.user, uid=uid, name=record["name"], scope=record["scope"],
            data={**record["extra"], "entries": entries},
        )  # fmt: skip
    except ApplicationError as error:
        where = error.extra.get("entry") if isinstance(error.extra, dict) else None
        line = int(where.rsplit(" ", 1)[-1]) + 1 if isinstance(where, str) and where[-1:].isdigit() else None
        raise ArchiveError(error.message, file=path if where else INDEX, line=line if where else number) from None
    return outcome


def _clocked(uid: uuid.UUID, job: ArchiveImport, clock: dict, record: dict[str, Any], *, created: bool) -> None:
    """The written book's clock and change record as the archive's: after its entries, whose writes the trigger
    counts as the server's (apps/sync/triggers.py). A new book of an archive without clocks keeps the server's."""
    if not clock:
        return
    changed_at = record["changed_at"] or timezone.now()
    fields: dict[str, Any] = {"clock": clock, "changed_at": changed_at, "changed_by": record["changed_by"]}
    if created:
        fields |= {
            "source_instance": record["source_instance"],
            "participating_instances": record["participating_instances"],
        }
    Lorebook.objects.filter(user=job.user, uid=uid).update(**fields)


def _tombstone_clock(job: ArchiveImport, uid: uuid.UUID) -> dict:
    entry = FeedEntry.objects.filter(user=job.user, type=FeedType.LOREBOOK, uid=uid).values_list("clock").first()
    return entry[0] if entry else {}


def _kept_beside(job: ArchiveImport, stored: Lorebook) -> None:
    lorebook_put(user=job.user, uid=uuid.uuid4(), name=f"{stored.name[: MAX_NAME - 17]} (before restore)",
                 scope=Lorebook.Scope.LINKED, data=lorebook_export(book=stored))  # fmt: skip
    job.count("lorebooks", "kept beside")


def lorebooks_in(job: ArchiveImport) -> None:
    for number, row in job.archive.lines(INDEX):
        archived = archived_uid(row.get("uid"), file=INDEX, line=number)
        record = record_check(LorebookRecordSerializer, row, file=INDEX, line=number)
        path = f"lorebooks/{archived}.jsonl"
        if record["file"] != path:
            raise ArchiveError(f"`file` must be {path}", file=INDEX, line=number)
        entries = _entries(job, path)
        uid = job.local(Lorebook, archived)
        stored = Lorebook.objects.filter(user=job.user, uid=uid).first()
        if stored is None:
            deleted = (FeedType.LOREBOOK, uid) in job.tombstoned
            if deleted and not job.restore:
                job.count("lorebooks", "deleted here")
                continue
            clock = record["clock"]
            if deleted:  # a restore, after the deletion: its clock descends from the tombstone's
                clock = clocks.tick(clocks.merge(clock, _tombstone_clock(job, uid)), clocks.SERVER)
            outcome = _put(job, record, uid, entries, number=number)
            _clocked(uid, job, clock, record, created=True)
            if deleted:  # back on the sync feed as well
                feed_revive(user_id=job.user.pk, kind=FeedType.LOREBOOK, uid=uid)
                outcome = "revived"
            job.count("lorebooks", outcome)
            continue
        side, clock, newer_here = _side(job, record, stored)
        if job.restore and side != "same":
            if newer_here:
                _kept_beside(job, stored)
            side, clock = "archive", clocks.tick(clocks.merge(record["clock"], stored.clock), clocks.SERVER)
        if side == "archive":
            job.count("lorebooks", _put(job, record, uid, entries, number=number))
            _clocked(uid, job, clock, record, created=False)
        else:
            if clock != stored.clock:
                Lorebook.objects.filter(pk=stored.pk).update(clock=clock)
            job.count("lorebooks", "same" if side == "same" else "kept")
