"""The moments Lorekeeper keeps: those within days of year 1 or 9999 are refused. Shown in a person's time zone, or
stored and read back, such a moment passes the years Python's datetime holds, and every page or list that showed it
answered a server error."""

from __future__ import annotations

from datetime import UTC, datetime

EARLIEST = datetime(1, 1, 3, tzinfo=UTC)
LATEST = datetime(9999, 12, 29, tzinfo=UTC)
RANGE_TEXT = "between 0001-01-03 and 9999-12-29"


def moment_kept(moment: datetime) -> bool:
    """Whether an aware `moment` is one Lorekeeper keeps."""
    return EARLIEST <= moment <= LATEST
