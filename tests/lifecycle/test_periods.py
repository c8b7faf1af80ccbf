"""Periods of the hierarchy: ISO weeks across year boundaries, months made of whole weeks, due times by zone."""

from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from apps.memories.services.lifecycle import periods

UTC, TOKYO = ZoneInfo("UTC"), ZoneInfo("Asia/Tokyo")


@pytest.mark.parametrize(
    ("day", "key"),
    [
        (date(2027, 1, 1), "2026-W53"),  # a Friday: ISO year 2026
        (date(2026, 12, 28), "2026-W53"),
        (date(2027, 1, 4), "2027-W01"),
        (date(2021, 1, 3), "2020-W53"),
        (date(2024, 12, 30), "2025-W01"),  # a Monday in December: ISO year 2025
    ],
)
def test_iso_weeks_belong_to_their_iso_year(day, key):
    assert periods.containing("weekly", day).key == key


def test_keys_round_trip_and_malformed_keys_are_refused():
    for granularity, key in [
        ("daily", "2026-11-21"),
        ("weekly", "2026-W47"),
        ("monthly", "2026-02"),
        ("yearly", "2026"),
    ]:
        assert periods.parse_key(granularity, key).key == key
    for granularity, key in [("daily", "2026-13-01"), ("weekly", "2026-W60"), ("monthly", "2026"), ("yearly", "x")]:
        with pytest.raises(ValueError):
            periods.parse_key(granularity, key)


def test_a_month_is_made_of_its_whole_weeks():
    december = periods.parse_key("monthly", "2026-12")
    # W49 starts 30 November and W53 ends 3 January: their December days count as days.
    assert [w.key for w in periods.children(december)] == ["2026-W50", "2026-W51", "2026-W52"]
    assert periods.month_of(date(2028, 2, 10)).end == date(2028, 2, 29)


@pytest.mark.parametrize(
    ("granularity", "key", "due"),
    [
        ("daily", "2026-11-21", datetime(2026, 11, 22, 5)),
        ("weekly", "2026-W47", datetime(2026, 11, 29, 5)),  # Mon 16 – Sun 22 November: the next Sunday
        ("weekly", "2026-W53", datetime(2027, 1, 10, 5)),
        ("monthly", "2026-12", datetime(2027, 1, 1, 5)),
        ("yearly", "2026", datetime(2027, 1, 1, 5)),
    ],
)
def test_a_period_is_due_at_the_first_0500_of_its_schedule_after_it_ends(granularity, key, due):
    period = periods.parse_key(granularity, key)
    assert period.due_at(UTC, 5) == due.replace(tzinfo=UTC)
    assert period.due_at(TOKYO, 5) == due.replace(tzinfo=TOKYO)  # 05:00 there, 20:00 UTC the day before
