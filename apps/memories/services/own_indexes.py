"""HNSW indexes of a user's own, for users with many memories.

The table's HNSW index holds every user's vectors. A search filtered to one user who holds a small share of the
table walks far through other users' vectors to find enough of its own (slow, and less exact), so search scans
such a scope exactly instead; that grows with the user's memories (about 145 ms at 100,000). A user with at least
`own_index_min` vectors of one dimension gets a partial HNSW index of their rows (WHERE user_id = N AND
embedding_dim = D), where their rows are the whole index whatever else the table holds: search walks it whatever
the user's share (apps/memories/search/candidates.py). Built without blocking writes (CREATE INDEX CONCURRENTLY,
in a task: apps/memories/tasks.py `own_indexes`), dropped when the user falls under half the threshold.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count

from apps.memories.models import HNSW_OPTIONS, INDEXED_DIMENSIONS, Memory
from apps.memories.search.candidates import own_index_name, own_index_state

MAX_BUILD_MB = 2048
LOCK_CLASS = 22_009  # advisory lock class: one build or drop per user at a time, across workers (migration 0011)
OWN_NAME = re.compile(r"^memory_own_(\d+)_(\d+)_hnsw$")


def own_index_due(*, user_id: int) -> bool:
    """Whether the user's vectors call for an index to be built or dropped (a cheap count: once an embedding run
    finds nothing left to embed)."""
    return bool(_changes_due(user_id))


def own_indexes_refresh(*, user_id: int) -> dict[int, str]:
    """Build the user's indexes they have grown into and drop those they have shrunk out of; answers what was done
    per dimension ("built", "dropped"). Outside a transaction: concurrent index builds cannot run in one. Another
    worker already at it for this user: nothing done here."""
    done: dict[int, str] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, int(user_id)])
        if not cursor.fetchone()[0]:
            return done
        try:
            for dim, (change, rows, state) in _changes_due(user_id).items():
                name = own_index_name(user_id, dim)
                if change == "build":
                    if state == "invalid":  # a build that was interrupted leaves an index the planner never uses
                        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    # The graph built in memory (on disk it takes several times as long): its vectors and links.
                    memory_mb = min(MAX_BUILD_MB, 64 + rows * (4 * dim + 512) // 2**20)
                    cursor.execute(f"SET maintenance_work_mem = '{int(memory_mb)}MB'")
                    try:
                        cursor.execute(
                            f"CREATE INDEX CONCURRENTLY {name} ON memories_memory "
                            f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WITH ({HNSW_OPTIONS}) "
                            f"WHERE user_id = {int(user_id)} AND embedding_dim = {dim}"
                        )
                    finally:
                        cursor.execute("RESET maintenance_work_mem")
                    done[dim] = "built"
                else:
                    cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    done[dim] = "dropped"
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, int(user_id)])
    return done


def _changes_due(user_id: int) -> dict[int, tuple[str, int, str | None]]:
    """Per dimension whose index should change: "build" (at least `own_index_min` vectors, no valid index) or
    "drop" (under half of it, an index there), with the user's vector count and the index's state."""
    minimum = int(settings.LOREKEEPER_SEARCH["own_index_min"])
    counts = _vector_counts(user_id)
    due: dict[int, tuple[str, int, str | None]] = {}
    for dim in INDEXED_DIMENSIONS:
        rows, state = counts.get(dim, 0), own_index_state(own_index_name(user_id, dim))
        if rows >= minimum and state != "valid":
            due[dim] = ("build", rows, state)
        elif rows < minimum // 2 and state is not None:
            due[dim] = ("drop", rows, state)
    return due


def own_index_users() -> list[int]:
    """Users who have an index of their own now (the sweep checks that each still should)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories_memory' AND indexname LIKE 'memory_own_%%'"
        )
        names = [OWN_NAME.match(row[0]) for row in cursor.fetchall()]
    return sorted({int(match.group(1)) for match in names if match})


def own_indexes_list(limit: int = 50) -> list[dict]:
    """The largest indexes of a user's own, for moderators (the memory list in the admin): user, dimension, state
    ("valid", or "invalid": being built, or a build that failed), the user's vectors of that dimension, bytes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, x.indisvalid, pg_relation_size(c.oid) FROM pg_index x "
            "JOIN pg_class c ON c.oid = x.indexrelid "
            "WHERE x.indrelid = 'memories_memory'::regclass AND c.relname LIKE 'memory_own_%%' "
            "ORDER BY pg_relation_size(c.oid) DESC, c.relname LIMIT %s",
            [int(limit)],
        )
        found = [(OWN_NAME.match(name), valid, size) for name, valid, size in cursor.fetchall()]
    indexes = [(int(m.group(1)), int(m.group(2)), valid, size) for m, valid, size in found if m]
    users = {user for user, *_ in indexes}
    names = dict(get_user_model().objects.filter(pk__in=users).values_list("pk", "username"))
    vectors = {  # (user, dimension) → their vectors, for every listed user in one query
        (user, dim): count
        for user, dim, count in Memory.objects.filter(user_id__in=users, embedding_dim__in=INDEXED_DIMENSIONS)
        .values_list("user_id", "embedding_dim")
        .annotate(n=Count("id"))
    }
    return [
        {
            "user_id": user,
            "username": names.get(user, ""),
            "dim": dim,
            "state": "valid" if valid else "invalid",
            "vectors": vectors.get((user, dim), 0),
            "bytes": size,
        }
        for user, dim, valid, size in indexes
    ]


def _vector_counts(user_id: int) -> dict[int, int]:
    rows = (
        Memory.objects.filter(user_id=user_id, embedding_dim__in=INDEXED_DIMENSIONS)
        .values_list("embedding_dim")
        .annotate(n=Count("id"))
    )
    return dict(rows)
