import logging

from celery import shared_task

from apps.sync.services.housekeeping import sync_records_prune

log = logging.getLogger(__name__)


@shared_task(name="sync.prune_records", soft_time_limit=300, time_limit=360)
def prune_records() -> dict[str, int]:
    """Daily: forget idempotent answers and seen generation ids old enough that no retry can still arrive."""
    return sync_records_prune()


@shared_task(name="sync.collect_tombstones", soft_time_limit=300, time_limit=360)
def collect_tombstones() -> int:
    """Hourly: tombstones every instance of their user has pulled past are no longer needed."""
    from apps.sync.services.feed import tombstones_collect

    return tombstones_collect()


@shared_task(name="sync.backup", acks_late=True, soft_time_limit=3 * 3600, time_limit=3 * 3600 + 300)
def backup(backup_id: int) -> str:
    """Make an archive, or import / restore one (a redelivered task finds the job claimed and leaves it)."""
    from apps.sync.services.backups import backup_run

    done = backup_run(backup_id=backup_id)
    return done.state if done else "gone"


@shared_task(name="sync.backups_due", soft_time_limit=300, time_limit=360)
def backups_due() -> list[int]:
    """Hourly: the automatic backups that are due."""
    from apps.sync.services.backups import backups_due as due

    return due()
