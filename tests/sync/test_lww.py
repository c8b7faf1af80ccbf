"""The last-write-wins key (apps.sync.clocks.lww_key): the one rule a push and an archive's import use to settle
two concurrent versions of an object."""

from datetime import UTC, datetime, timedelta

from apps.sync.clocks import SERVER, lww_key

NOON = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
PRIORITIES = {"laptop": 1, "phone": 5}


def test_the_later_write_wins_to_the_second():
    assert lww_key(NOON + timedelta(seconds=1), "laptop", PRIORITIES) > lww_key(NOON, "phone", PRIORITIES)


def test_within_one_second_the_higher_priority_wins():
    earlier, later = NOON + timedelta(milliseconds=100), NOON + timedelta(milliseconds=900)
    assert lww_key(earlier, "phone", PRIORITIES) > lww_key(later, "laptop", PRIORITIES)


def test_at_equal_priority_the_greater_instance_key_wins():
    assert lww_key(NOON, "tablet", {}) > lww_key(NOON, "desktop", {})
    assert lww_key(NOON, "tablet", {}) == (int(NOON.timestamp()), 0, "tablet")


def test_a_write_with_no_author_is_the_servers_and_one_with_no_time_is_the_oldest():
    assert lww_key(NOON, "", {SERVER: 3}) == (int(NOON.timestamp()), 3, SERVER)
    assert lww_key(None, "phone", PRIORITIES) == (0, 5, "phone")
    assert lww_key(None, "phone", PRIORITIES) < lww_key(NOON, "laptop", PRIORITIES)
