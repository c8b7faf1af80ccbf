"""Memories 0010: an `occurred_at` stored before the moments Lorekeeper keeps (apps/common/moments.py) had bounds
becomes unknown, and the person's memories list again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from apps.memories.models import Memory
from apps.memories.services.memories import memory_create
from tests.migrating import leaves, migrate

BEFORE = [("memories", "0009_search_words_by_owner")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_forgets_the_moments_at_the_edges_of_the_calendar(api, user, character, settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"
    today = leaves()
    when = datetime(2026, 5, 1, 12, tzinfo=UTC)
    for content in "abc":
        memory_create(user=user, character=character, kind="fact", content=content, occurred_at=when)
    try:
        migrate(BEFORE)
        clocks = dict(Memory.objects.values_list("content", "clock"))
        with connection.cursor() as cursor:
            # What indexing stored from "0001-01-01T00:00:00+14:00" before it was read as no moment: psycopg cannot
            # read a year BC back, so every list of the person's memories failed.
            cursor.execute("UPDATE memories_memory SET occurred_at = '0001-12-31 10:00:00+00 BC' WHERE content = 'a'")
            cursor.execute("UPDATE memories_memory SET occurred_at = '9999-12-31 20:00:00+00' WHERE content = 'b'")
        migrate(today)
    finally:
        migrate(today)

    assert dict(Memory.objects.values_list("content", "occurred_at")) == {"a": None, "b": None, "c": when}
    assert api.get("/api/v1/memories/").status_code == 200
    # The server's change, which instances pull; the memory left alone keeps its clock.
    after = dict(Memory.objects.values_list("content", "clock"))
    assert (after["a"] != clocks["a"], after["b"] != clocks["b"], after["c"] == clocks["c"]) == (True, True, True)
