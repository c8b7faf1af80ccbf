"""SillyTavern's `send_date` of a message, read as a moment: it writes it in three ways over its versions."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils.dateparse import parse_datetime

from apps.common.moments import moment_kept


def parse_send_date(value) -> datetime | None:
    """SillyTavern's send_date: ISO string, epoch (ms or s), or the old "2026-09-25 @23h59m28s" form."""
    if isinstance(value, bool) or value is None:
        return None
    parsed = None
    try:
        if isinstance(value, int | float):
            seconds = value / 1000 if value > 10**11 else value
            parsed = datetime.fromtimestamp(seconds, tz=UTC)
        elif isinstance(value, str):
            text = value.strip()
            if "@" in text:
                text = text.replace(" @", "T").replace("h", ":").replace("m", ":").rstrip("s")
            parsed = parse_datetime(text) or _parse_human_date(text)
            if parsed is not None and parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
        # A date outside the years 2 to 9998 is no message's (apps/common/moments.py).
        return parsed if parsed is not None and moment_kept(parsed) else None
    except (ValueError, OverflowError, OSError):
        return None


# SillyTavern 1.12 wrote "May 1, 2024 12:00pm"; some exports "May 1, 2024 12:00 PM" or a bare date.
_HUMAN_DATE_FORMATS = ("%B %d, %Y %I:%M%p", "%B %d, %Y %I:%M %p", "%b %d, %Y %I:%M%p", "%B %d, %Y", "%Y-%m-%d")


def _parse_human_date(text: str) -> datetime | None:
    for pattern in _HUMAN_DATE_FORMATS:
        try:
            return datetime.strptime(text, pattern)
        except ValueError:
            continue
    return None
