from celery import shared_task

from apps.sync.services.feed import tombstones_collect
from apps.sync.services.housekeeping import sync_records_prune


@shared_task(name="sync.prune_records", soft_time_limit=300, time_limit=360)
def prune_records() -> dict[str, int]:
    """Daily: forget idempotent answers and seen generation ids old enough that no retry can still arrive."""
    return sync_records_prune()


@shared_task(name="sync.collect_tombstones", soft_time_limit=300, time_limit=360)
def collect_tombstones() -> int:
    """Hourly: tombstones every instance of their user has pulled past are no longer needed."""
    return tombstones_collect()
