"""Which messages each batch of the batch tiers made its memories from, kept apart from the jobs (which are forgotten
after `keep_jobs_days`): a rebuild takes back the whole batch that held an edited message, since its memories came
from all of its messages (as ST-BME replays the affected batches: docs/GLOSSARY.md)."""

from __future__ import annotations

from django.db.models import Min

from apps.extraction.models import ExtractedBatch

BATCH_TIERS = ("session", "longterm", "arcs", "ledger")


def batch_record(*, chat_id: int, tier: str, result: dict) -> None:
    """Keep the range a done job of a batch tier made memories from (its result's `range`), if it has one."""
    made = result.get("range")
    if tier not in BATCH_TIERS or not (isinstance(made, list) and len(made) == 2):
        return
    start, end = made
    if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end:
        ExtractedBatch.objects.create(chat_id=chat_id, tier=tier, start=start, end=end)


def batch_start(chat_id: int, index: int) -> int:
    """Where the earliest batch holding message `index` began; `index` itself when none holds it."""
    holding = ExtractedBatch.objects.filter(chat_id=chat_id, start__lte=index, end__gte=index)
    start = holding.aggregate(start=Min("start"))["start"]
    return index if start is None else start


def batches_forget(*, chat_id: int, start: int) -> int:
    """A rebuild from `start`: the batches that began there or later are extracted again, and kept again then."""
    return ExtractedBatch.objects.filter(chat_id=chat_id, start__gte=start).delete()[0]
