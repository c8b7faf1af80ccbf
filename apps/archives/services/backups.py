"""Backups (ST-BME's cloud mirror, server side, docs/GLOSSARY.md): archives of an account made now or on a schedule,
kept up to a number, downloaded, restored, and archives uploaded to import. The work runs in the background (a job per
Backup row, with its stage and progress); the requests only record it.

What an account keeps on disk is bounded: an uploaded archive is removed once its import ends (done or failed), and
the backups kept plus the uploads waiting may take at most LOREKEEPER_BACKUP_QUOTA_BYTES; an upload or a backup
that would pass it is refused (a backup's size is known only once it is written: then its job fails)."""

from __future__ import annotations

import logging
import tempfile
from datetime import timedelta
from typing import Any, BinaryIO

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Q
from django.utils import timezone

from apps.archives.models import Backup, BackupSettings
from apps.archives.services import queue
from apps.archives.services.archive.export import archive_write
from apps.archives.services.archive.format import size_text
from apps.archives.services.archive.importing import archive_import
from apps.common.exceptions import ApplicationError

log = logging.getLogger(__name__)

STALE_AFTER = timedelta(hours=2)  # a running job not heard from since is taken for lost


def backup_settings_get(*, user: AbstractUser) -> BackupSettings:
    found, _ = BackupSettings.objects.get_or_create(user=user)
    return found


@transaction.atomic
def backup_settings_set(*, user: AbstractUser, data: dict[str, Any]) -> BackupSettings:
    current = BackupSettings.objects.select_for_update().get(pk=backup_settings_get(user=user).pk)
    if "mode" in data:
        if data["mode"] not in BackupSettings.Mode.values:
            raise ApplicationError("The mode is manual or automatic.", {"field": "mode"})
        current.mode = data["mode"]
    if "every_hours" in data:
        hours = data["every_hours"]
        if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= 24 * 30:
            raise ApplicationError("Back up every 1 to 720 hours.", {"field": "every_hours"})
        current.every_hours = hours
    if "keep" in data:
        keep = data["keep"]
        if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= 100:
            raise ApplicationError("Keep 1 to 100 backups.", {"field": "keep"})
        current.keep = keep
    current.save()
    return current


def _busy(user: AbstractUser) -> bool:
    return Backup.objects.filter(user=user, state__in=[Backup.State.QUEUED, Backup.State.RUNNING]).exists()


def _lock(user: AbstractUser) -> None:
    """One backup request of an account at a time (the check that none is under way, the quota's sum)."""
    BackupSettings.objects.select_for_update().filter(pk=backup_settings_get(user=user).pk).first()


def backup_storage_used(*, user: AbstractUser, for_backup: bool = False) -> int:
    """Bytes the account's archives take on disk: its backups and the uploads not yet imported. `for_backup`: what
    stays once a new backup is made (pruning then keeps the newest `keep`, the new one included)."""
    rows = Backup.objects.filter(user=user).exclude(file="").order_by("-created_at")
    keep = backup_settings_get(user=user).keep - 1 if for_backup else None
    used = 0
    for kind, state, size in rows.values_list("kind", "state", "size"):
        if keep is not None and kind == Backup.Kind.BACKUP and state == Backup.State.DONE:
            if keep <= 0:
                continue
            keep -= 1
        used += size
    return used


def _quota_refusal(*, user: AbstractUser, adding: int = 0) -> str:
    """Why a new backup (adding: its size, when known) would pass the account's quota, or ""."""
    quota = settings.LOREKEEPER_BACKUP_QUOTA_BYTES
    used = backup_storage_used(user=user, for_backup=True)
    if used + adding <= quota and (adding or used < quota):
        return ""
    what = f"This backup ({size_text(adding)})" if adding else "A new backup"
    return (
        f"{what} would take your stored backups and uploads past your quota of {size_text(quota)} "
        f"({size_text(used)} used): delete old backups, or keep fewer, first."
    )


def _enqueue(backup: Backup) -> None:
    transaction.on_commit(lambda: queue.enqueue_backup(backup.pk))


@transaction.atomic
def backup_start(*, user: AbstractUser, trigger: str = Backup.Trigger.MANUAL) -> Backup:
    """Queue an archive of the account; refused when the account's stored archives already fill its quota."""
    _lock(user)
    if _busy(user):
        raise ApplicationError("A backup, import or restore is already under way: wait for it.", status=409)
    refusal = _quota_refusal(user=user)
    if refusal:
        raise ApplicationError(refusal, {"field": "backup"}, status=409)
    backup = Backup.objects.create(user=user, kind=Backup.Kind.BACKUP, trigger=trigger, stage="queued")
    _enqueue(backup)
    return backup


@transaction.atomic
def backup_restore_start(*, backup: Backup) -> Backup:
    """Queue bringing a backup's content back (a merge that also revives what was deleted since)."""
    if backup.kind != Backup.Kind.BACKUP or backup.state != Backup.State.DONE or not backup.file:
        raise ApplicationError("Only a finished backup can be restored.", {"field": "backup"})
    if _busy(backup.user):
        raise ApplicationError("A backup, import or restore is already under way: wait for it.", status=409)
    job = Backup.objects.create(
        user=backup.user, kind=Backup.Kind.RESTORE, trigger=Backup.Trigger.MANUAL, source=backup, stage="queued"
    )
    _enqueue(job)
    return job


@transaction.atomic
def archive_upload(*, user: AbstractUser, upload: BinaryIO, name: str = "archive.zip") -> Backup:
    """Keep an uploaded archive and queue its import (merged by the sync rules); the file goes once the import
    ends. Refused when it would take the account's stored archives past its quota."""
    limit = settings.LOREKEEPER_MAX_IMPORT_BYTES
    size = getattr(upload, "size", 0) or 0
    if size > limit:
        raise ApplicationError(f"An archive may be at most {limit // 1024**2:,} MB.", {"field": "file"}, status=413)
    _lock(user)
    if _busy(user):
        raise ApplicationError("A backup, import or restore is already under way: wait for it.", status=409)
    quota, used = settings.LOREKEEPER_BACKUP_QUOTA_BYTES, backup_storage_used(user=user)
    if used + size > quota:
        raise ApplicationError(
            f"This archive ({size_text(size)}) would take your stored backups and uploads past your quota of "
            f"{size_text(quota)} ({size_text(used)} used): delete old backups first.",
            {"field": "file", "quota": quota, "used": used},
            status=413,
        )
    job = Backup(user=user, kind=Backup.Kind.IMPORT, trigger=Backup.Trigger.UPLOAD, stage="queued")
    job.file.save(f"upload-{timezone.now():%Y%m%d-%H%M%S}.zip", File(upload, name=name), save=False)
    job.size = job.file.size
    job.save()
    _enqueue(job)
    return job


class _Progress:
    """A job's stage and percent, written on a connection of its own: the work's transaction (an import is one)
    commits only at its end, and the page polling the job must see it move before that."""

    def __init__(self, backup: Backup) -> None:
        self.backup_id = backup.pk
        self.connection = None

    def __call__(self, stage: str, percent: int) -> None:
        if self.connection is None:
            self.connection = connections.create_connection(DEFAULT_DB_ALIAS)
        with self.connection.cursor() as cursor:
            cursor.execute(
                "UPDATE sync_backup SET stage = %s, progress = %s WHERE id = %s",
                [stage[:100], max(0, min(100, percent)), self.backup_id],
            )

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def backup_run(*, backup_id: int) -> Backup | None:
    """Do a queued job: make the archive, or import / restore one. A job already done (a redelivered task) is
    left alone; a failure is recorded on it with the error."""
    claimed = Backup.objects.filter(pk=backup_id, state=Backup.State.QUEUED).update(
        state=Backup.State.RUNNING, started_at=timezone.now(), stage="starting"
    )
    backup = Backup.objects.filter(pk=backup_id).select_related("user", "source").first()
    if not claimed or backup is None:
        return backup
    progress = _Progress(backup)
    try:
        if backup.kind == Backup.Kind.BACKUP:
            with tempfile.TemporaryFile() as target:
                counts = archive_write(user=backup.user, target=target, progress=progress)
                refusal = _quota_refusal(user=backup.user, adding=target.tell())
                if refusal:
                    raise ApplicationError(refusal, {"field": "backup"})
                target.seek(0)
                backup.file.save(f"lorekeeper-{timezone.now():%Y%m%d-%H%M%S}.zip", File(target), save=False)
            backup.size = backup.file.size
        else:
            source = backup.source if backup.kind == Backup.Kind.RESTORE else backup
            if source is None or not source.file:
                raise ApplicationError("The backup to restore is gone.")
            with source.file.open("rb") as stream:
                counts = archive_import(
                    user=backup.user,
                    source=stream,
                    restore=backup.kind == Backup.Kind.RESTORE,
                    progress=progress,
                )
    except Exception as exc:  # noqa: BLE001 — any failure is the job's to show, with its message
        message = exc.message if isinstance(exc, ApplicationError) else f"{type(exc).__name__}: {exc}"
        Backup.objects.filter(pk=backup.pk).update(
            state=Backup.State.FAILED, error=message[:2000], finished_at=timezone.now(), stage="failed"
        )
        if not isinstance(exc, ApplicationError):
            raise
        backup.refresh_from_db()
        return backup
    finally:
        progress.close()
        if backup.kind == Backup.Kind.IMPORT:
            upload_remove(backup=backup)
    backup.state, backup.counts, backup.stage, backup.progress = Backup.State.DONE, counts, "done", 100
    backup.finished_at = timezone.now()
    backup.save(update_fields=["state", "counts", "stage", "progress", "finished_at", "file", "size"])
    if backup.kind == Backup.Kind.BACKUP:
        backups_prune(user=backup.user)
    return backup


def backups_prune(*, user: AbstractUser) -> int:
    """Keep the newest `keep` finished backups; remove older ones with their files."""
    keep = backup_settings_get(user=user).keep
    done = Backup.objects.filter(user=user, kind=Backup.Kind.BACKUP, state=Backup.State.DONE).order_by("-created_at")
    removed = 0
    for old in done[keep:]:
        backup_delete(backup=old)
        removed += 1
    return removed


def upload_remove(*, backup: Backup) -> None:
    """An uploaded archive's file, once its import has ended: what it brought is in the account, the zip goes.
    The row stays (what the import did, or why it failed)."""
    if not backup.file:
        return
    backup.file.delete(save=False)
    backup.file = ""
    Backup.objects.filter(pk=backup.pk).update(file="")


def uploads_finished_remove() -> int:
    """Files of imports that ended without removing them (a worker stopped in between, a job marked lost)."""
    ended = Backup.objects.filter(kind=Backup.Kind.IMPORT, state__in=[Backup.State.DONE, Backup.State.FAILED])
    removed = 0
    for job in ended.exclude(file=""):
        upload_remove(backup=job)
        removed += 1
    return removed


def backup_delete(*, backup: Backup) -> None:
    if backup.state in (Backup.State.QUEUED, Backup.State.RUNNING):
        raise ApplicationError("That job is under way: wait for it to finish.", status=409)
    if backup.file:
        backup.file.delete(save=False)
    backup.delete()


def backups_due(*, now=None) -> list[int]:
    """Start the automatic backups that are due (and mark lost jobs failed). Returns the new backups' ids."""
    now = now or timezone.now()
    Backup.objects.filter(state=Backup.State.RUNNING, started_at__lt=now - STALE_AFTER).update(
        state=Backup.State.FAILED, error="The job was lost (its worker stopped); start it again.", stage="failed"
    )
    # Jobs whose task never reached a worker (the broker was down when they were asked for).
    for pk in Backup.objects.filter(state=Backup.State.QUEUED, created_at__lt=now - timedelta(minutes=10)).values_list(
        "pk", flat=True
    ):
        queue.enqueue_backup(pk)
    backup_files_orphaned_remove()
    uploads_finished_remove()
    started = []
    for choice in BackupSettings.objects.filter(mode=BackupSettings.Mode.AUTOMATIC).select_related("user"):
        since = now - timedelta(hours=choice.every_hours)
        recent = Backup.objects.filter(user=choice.user, kind=Backup.Kind.BACKUP, created_at__gte=since).filter(
            Q(state=Backup.State.DONE) | Q(state__in=[Backup.State.QUEUED, Backup.State.RUNNING])
        )
        if recent.exists() or _busy(choice.user):
            continue
        try:
            started.append(backup_start(user=choice.user, trigger=Backup.Trigger.AUTOMATIC).pk)
        except ApplicationError as exc:  # its quota is full: the next check tries again
            log.info("no automatic backup for user %s: %s", choice.user_id, exc.message)
    return started


def backup_files_orphaned_remove() -> int:
    """Archives of accounts that no longer exist (an account deleted by a moderator takes its Backup rows, not
    their files): removed. Returns how many files went."""
    from django.contrib.auth import get_user_model

    if not default_storage.exists("backups"):
        return 0
    folders, _ = default_storage.listdir("backups")
    ids = {folder for folder in folders if folder.isdigit()}
    alive = {
        str(pk) for pk in get_user_model().objects.filter(pk__in=[int(i) for i in ids]).values_list("pk", flat=True)
    }
    removed = 0
    for folder in ids - alive:
        _, files = default_storage.listdir(f"backups/{folder}")
        for name in files:
            default_storage.delete(f"backups/{folder}/{name}")
            removed += 1
    return removed
