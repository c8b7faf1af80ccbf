"""The periods of the hierarchy (as entity-core has them, docs/GLOSSARY.md): days, ISO weeks (Monday to Sunday,
`2026-W47`, the ISO year, so 2027-01-01 lies in 2026-W53), months and years, and when each becomes due.

A period is consolidated at the first scheduled moment after it has ended, in the user's time zone: a day at
05:00 the next morning, a week on the Sunday 05:00 after it (entity-core's cron), a month on the 1st at 05:00, a
year on 1 January at 05:00. Days belong to their calendar month and year. A month is made from the weekly
summaries of the ISO weeks that lie wholly inside it and the daily ones of its other days (a week straddling two
months, like 2026-W53 from 28 December to 3 January, gives each month its own days); a year from its months.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from apps.common.moments import FIRST_YEAR, LAST_YEAR, RANGE_TEXT

LEVELS = ("daily", "weekly", "monthly", "yearly")
EXAMPLES = {"daily": "2026-11-21", "weekly": "2026-W47", "monthly": "2026-11", "yearly": "2026"}
CHILD = {"weekly": "daily", "monthly": "weekly", "yearly": "monthly"}


@dataclass(frozen=True, order=True)
class Period:
    granularity: str
    start: date
    end: date  # inclusive

    @property
    def key(self) -> str:
        if self.granularity == "daily":
            return self.start.isoformat()
        if self.granularity == "weekly":
            year, week, _ = self.start.isocalendar()
            return f"{year}-W{week:02d}"
        if self.granularity == "monthly":
            return f"{self.start.year}-{self.start.month:02d}"
        return str(self.start.year)

    def due_at(self, tz: ZoneInfo, hour: int) -> datetime:
        after = self.end + timedelta(days=1)
        if self.granularity == "weekly":
            after += timedelta(days=(6 - after.weekday()) % 7)  # the next Sunday
        return datetime.combine(after, time(hour), tzinfo=tz)

    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days + 1)]


def day(value: date) -> Period:
    return Period("daily", value, value)


def week_of(value: date) -> Period:
    monday = value - timedelta(days=value.weekday())
    return Period("weekly", monday, monday + timedelta(days=6))


def month_of(value: date) -> Period:
    first = value.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return Period("monthly", first, following - timedelta(days=1))


def year_of(value: date) -> Period:
    return Period("yearly", date(value.year, 1, 1), date(value.year, 12, 31))


def containing(granularity: str, value: date) -> Period:
    return {"daily": day, "weekly": week_of, "monthly": month_of, "yearly": year_of}[granularity](value)


def parse_key(granularity: str, key: str) -> Period:
    """The period named by a key (`2026-11-21`, `2026-W47`, `2026-11`, `2026`); ValueError when malformed, not text
    (a client may have written any JSON there) or outside the years Lorekeeper keeps (apps/common/moments.py)."""
    if not isinstance(key, str):
        raise ValueError(f"a period is text, not {type(key).__name__}")
    try:
        period = _parsed(granularity, key)
    except OverflowError:  # its last day is past year 9999
        raise ValueError(f"a period is {RANGE_TEXT}") from None
    if not (FIRST_YEAR <= period.start.year and period.end.year <= LAST_YEAR):
        raise ValueError(f"a period is {RANGE_TEXT}")
    return period


def _parsed(granularity: str, key: str) -> Period:
    if granularity == "daily":
        return day(date.fromisoformat(key))
    if granularity == "weekly":
        year, _, week = key.partition("-W")
        return week_of(date.fromisocalendar(int(year), int(week), 1))
    if granularity == "monthly":
        year, _, month = key.partition("-")
        if not month:
            raise ValueError(key)
        return month_of(date(int(year), int(month), 1))
    if granularity == "yearly":
        return year_of(date(int(key), 1, 1))
    raise ValueError(granularity)


def children(period: Period) -> list[Period]:
    """The periods one level down that lie wholly inside this one (a month's whole weeks)."""
    if period.granularity == "weekly":
        return [day(d) for d in period.days()]
    if period.granularity == "monthly":
        weeks = {week_of(d) for d in period.days()}
        return sorted(w for w in weeks if w.start >= period.start and w.end <= period.end)
    if period.granularity == "yearly":
        return [month_of(date(period.start.year, m, 1)) for m in range(1, 13)]
    return []


def local_day(moment: datetime, tz: ZoneInfo) -> date:
    return moment.astimezone(tz).date()
