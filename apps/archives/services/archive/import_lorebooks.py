"""The lorebooks of an account archive (apps/archives/services/archive/__init__.py): each book from its line in
lorebooks.jsonl and its entries from its own file, every entry checked as a World Info import checks it
(apps/lorebooks/services/fields.py). Lorebooks carry no vector clock: the later `updated_at` wins. A book already
here under the archive's uid is kept when it changed after the archive's; a restore brings the archive's back, the
newer one kept beside it as "<name> (before restore)". A book whose name another book here holds comes in as
"<name> (2)". Nothing is lost; a book deleted here since the archive comes back."""

from __future__ import annotations

import uuid

from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.merge import ArchiveImport, archived_uid
from apps.archives.services.archive.records import LorebookRecordSerializer, record_check
from apps.common.exceptions import ApplicationError
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import MAX_NAME, lorebook_export, lorebook_put
from apps.sync.models import FeedType
from apps.sync.services.feed import feed_revive

INDEX = "lorebooks.jsonl"


def _entries(job: ArchiveImport, path: str) -> list[dict]:
    if job.archive.member(path) is None:
        raise ArchiveError("the book's entries are missing from the archive", file=path)
    return [row for _, row in job.archive.lines(path)]


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
        if stored is not None and stored.updated_at >= record["updated_at"] and not job.restore:
            job.count("lorebooks", "kept")
            continue
        try:
            if stored is not None and job.restore and stored.updated_at > record["updated_at"]:
                lorebook_put(user=job.user, uid=uuid.uuid4(), name=f"{stored.name[: MAX_NAME - 17]} (before restore)",
                             scope=Lorebook.Scope.LINKED, data=lorebook_export(book=stored))  # fmt: skip
                job.count("lorebooks", "kept beside")
            _, outcome = lorebook_put(
                user=job.user, uid=uid, name=record["name"], scope=record["scope"],
                data={**record["extra"], "entries": entries},
            )  # fmt: skip
        except ApplicationError as error:
            where = error.extra.get("entry") if isinstance(error.extra, dict) else None
            line = int(where.rsplit(" ", 1)[-1]) + 1 if isinstance(where, str) and where[-1:].isdigit() else None
            raise ArchiveError(error.message, file=path if where else INDEX, line=line if where else number) from None
        if (FeedType.LOREBOOK, uid) in job.tombstoned:  # deleted here since: back on the sync feed as well
            feed_revive(user_id=job.user.pk, kind=FeedType.LOREBOOK, uid=uid)
        job.count("lorebooks", outcome)
