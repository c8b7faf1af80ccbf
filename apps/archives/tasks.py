from celery import shared_task

from apps.archives.services.backups import backup_run
from apps.archives.services.backups import backups_due as due


@shared_task(name="archives.backup", acks_late=True, soft_time_limit=3 * 3600, time_limit=3 * 3600 + 300)
def backup(backup_id: int) -> str:
    """Make an archive, or import / restore one (a redelivered task finds the job claimed and leaves it)."""
    done = backup_run(backup_id=backup_id)
    return done.state if done else "gone"


@shared_task(name="archives.backups_due", soft_time_limit=300, time_limit=360)
def backups_due() -> list[int]:
    """Hourly: the automatic backups that are due, and queued jobs whose task was lost."""
    return due()
