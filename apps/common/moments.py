"""The moments Lorekeeper keeps: years 2 to 9998. Shown in a person's time zone, or stored and read back, a moment
within days of year 1 or 9999 passes the years Python's datetime holds, and every page or list that showed it
answered a server error; and search and the summaries reckon days before and after a moment (a month's slack, the
60 days a first summary run reaches back, a period's week): a year on each side leaves them room."""

from __future__ import annotations

from datetime import UTC, datetime

FIRST_YEAR, LAST_YEAR = 2, 9998
EARLIEST = datetime(FIRST_YEAR, 1, 1, tzinfo=UTC)
LATEST = datetime(LAST_YEAR, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
RANGE_TEXT = f"in the years {FIRST_YEAR} to {LAST_YEAR}"


def moment_kept(moment: datetime) -> bool:
    """Whether `moment` (a naive one read as UTC) is one Lorekeeper keeps."""
    return EARLIEST <= (moment if moment.tzinfo else moment.replace(tzinfo=UTC)) <= LATEST
