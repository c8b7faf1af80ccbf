"""The times a search query names ("on 9 October, 2022", "in May 2023", "in 2022", "in June"), as periods of story
time that memory_search favours (the `time` signal, docs/SEARCH.md).

A period runs on `slack_days` past its end: a message tells of a day after it ("last Friday", "yesterday"), and a
message memory's time is when it was sent. Relative expressions in the query ("last week") are not resolved: what
they count from (the day the question is about, or the story's latest day) is not in the query.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
# Most specific first: what a pattern matched is taken out of the text before the next looks.
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_YEAR_ALONE = re.compile(rf"\b{_YEAR}\b")
# A month with no year only after a word that makes it a time ("in May"), not the verb ("she may").
_MONTH_ALONE = re.compile(rf"\b(?:in|during|of|since|by|until|early|late|mid)\s+{_MONTH}\b", re.IGNORECASE)


@dataclass(frozen=True)
class Period:
    """From `start` to `end` (dates, inclusive); with `month` set, that month of any year (start and end unused)."""

    start: date | None = None
    end: date | None = None
    month: int | None = None


def query_periods(query: str, *, slack_days: int) -> list[Period]:
    """The periods the query names, each running `slack_days` past its end."""
    periods: list[Period] = []
    slack = timedelta(days=slack_days)
    text = query

    def taken(match: re.Match) -> str:
        return " " * len(match.group())

    for pattern, order in ((_DAY_MONTH_YEAR, (3, 2, 1)), (_MONTH_DAY_YEAR, (3, 1, 2))):
        for match in pattern.finditer(text):
            year, month, day = (match.group(i) for i in order)
            try:
                day_named = date(int(year), _MONTHS[month.lower()], int(day))
            except ValueError:  # "31 February, 2023"
                continue
            periods.append(Period(day_named, day_named + slack))
        text = pattern.sub(taken, text)
    for match in _MONTH_YEAR.finditer(text):
        year, month = int(match.group(2)), _MONTHS[match.group(1).lower()]
        last = calendar.monthrange(year, month)[1]
        periods.append(Period(date(year, month, 1), date(year, month, last) + slack))
    text = _MONTH_YEAR.sub(taken, text)
    for match in _YEAR_ALONE.finditer(text):
        year = int(match.group(1))
        periods.append(Period(date(year, 1, 1), date(year, 12, 31) + slack))
    for match in _MONTH_ALONE.finditer(text):
        periods.append(Period(month=_MONTHS[match.group(1).lower()]))
    return periods


def within(moment: datetime, periods: list[Period], *, slack_days: int) -> bool:
    """Whether the moment's day falls in one of the periods (a month of any year: that month, or `slack_days`
    into the next)."""
    day = moment.date()
    for period in periods:
        if period.month is not None:
            if period.month in (day.month, (day - timedelta(days=slack_days)).month):
                return True
        elif period.start <= day <= period.end:
            return True
    return False
