"""A selector: how many memories were active on each day, for the growth chart of the memory browser
(apps/memories/views/charts.py). The same scope as the browser's list (`selectors.memory_list`: all of a user's, a
character's, or a chat's with its characters' persistent ones), chat messages left out as the list leaves them out by
default.

A memory counts from the day it was made. A retired one stops counting on the day it was retired, which is its last
change (`changed_at`, kept by the database for every write, and a retired memory is not written again), never before
it was made."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from itertools import accumulate

from django.contrib.auth.models import AbstractUser
from django.db.models import Count, Min
from django.db.models.functions import Coalesce, Greatest, TruncDate
from django.utils import timezone

from apps.memories import selectors
from apps.memories.models import Status

WEEK = 7


@dataclass(frozen=True)
class Growth:
    days: list[date]
    active: list[int]  # active at the end of each day
    before: int  # active before the first day
    ever: int  # memories made in the scope, retired ones included: none means nothing to draw

    @property
    def now(self) -> int:
        return self.active[-1]

    def change(self, days: int = WEEK) -> int:
        """The change over the last `days` days."""
        return self.now - (self.active[-days - 1] if len(self.active) > days else self.before)


def memory_growth(
    *,
    user: AbstractUser,
    character_id: int | None = None,
    chat_id: int | None = None,
    days: int | None = 30,
    today: date | None = None,
) -> Growth:
    """Active memories at the end of each of the last `days` days, today included (None: since the first memory)."""
    today = today or timezone.localdate()
    memories = selectors.memory_list(user=user, character_id=character_id, chat_id=chat_id, include_messages=False)
    memories = memories.order_by().annotate(
        made=TruncDate("created_at"),
        gone=TruncDate(Greatest(Coalesce("changed_at", "updated_at"), "created_at")),
    )
    totals = memories.aggregate(ever=Count("id", distinct=True), first=Min("made"))
    if days is None:
        start = min(totals["first"] or today, today)
    else:
        start = today - timedelta(days=days - 1)
    retired = memories.filter(status=Status.RETIRED)
    before = memories.filter(made__lt=start).count() - retired.filter(gone__lt=start).count()
    made = _per_day(memories.filter(made__gte=start, made__lte=today), "made")
    gone = _per_day(retired.filter(gone__gte=start, gone__lte=today), "gone")
    span = [start + timedelta(days=i) for i in range((today - start).days + 1)]
    active = list(accumulate((made.get(day, 0) - gone.get(day, 0) for day in span), initial=before))[1:]
    return Growth(days=span, active=active, before=before, ever=totals["ever"])


def _per_day(memories, field: str) -> dict[date, int]:
    rows = memories.values(field).annotate(n=Count("id", distinct=True)).order_by()
    return {row[field]: row["n"] for row in rows}
