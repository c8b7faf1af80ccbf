"""Every HNSW index of memories rebuilt with 12 links a node and a build list of 48, not pgvector's 16 and 64
(apps/memories/models.py HNSW_OPTIONS says why).

The options are set on each index, then the index is rebuilt without blocking writes (REINDEX CONCURRENTLY, so the
migration runs outside a transaction), and no row changes. Migrated beside a running server, searches keep the old
graph until the new one replaces it; `manage.py serve` migrates before it serves, so there the site starts once
every index is rebuilt (33 s for 220,000 vectors on 2 vCPUs; docs/SEARCH.md).

- A user's own index is rebuilt under the lock its task holds to build or drop it (apps/memories/services/
  own_indexes.py), so neither sees the other's half-done work; one the task dropped meanwhile is left dropped.
- An index left invalid by an interrupted build gets the options only: nothing searches it, and the task drops a
  user's invalid index before it builds it again.
- What an interrupted REINDEX CONCURRENTLY leaves (an invalid copy named `…_ccnew` or `…_ccold`) is dropped: it
  would be written on every insert, doubling the cost the options cut, and nothing else drops it.
"""

import re

from django.db import migrations

# What the task that builds a user's own index uses as it runs today, so that the two exclude each other.
from apps.memories.services.own_indexes import LOCK_CLASS, MAX_BUILD_MB, OWN_NAME

TWELVE = "m = 12, ef_construction = 48"
_LEFT_BY_REINDEX = re.compile(r"_cc(new|old)\d*$")


def _indexes(cursor) -> list[tuple[str, bool]]:
    cursor.execute(
        """
        SELECT c.relname, i.indisvalid
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_am am ON am.oid = c.relam
        WHERE i.indrelid = 'memories_memory'::regclass AND am.amname = 'hnsw'
        ORDER BY c.relname
        """
    )
    return cursor.fetchall()


def _rebuild_one(cursor, name: str, options: str | None) -> None:
    """Set the options on the index, and rebuild it if it is valid; nothing if it is gone."""
    cursor.execute(
        "SELECT i.indisvalid, pg_relation_size(i.indexrelid) FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        [name],
    )
    found = cursor.fetchone()
    if found is None:
        return
    setting = f"SET ({options})" if options else "RESET (m, ef_construction)"
    cursor.execute(f'ALTER INDEX "{name}" {setting}')
    valid, size = found
    if not valid:
        return
    # The graph built in memory, as a user's own index is: about what the index holds on disk (its statistics may
    # never have been gathered), or the build goes on disk, several times as long.
    cursor.execute(f"SET maintenance_work_mem = '{min(MAX_BUILD_MB, 64 + size // 2**20)}MB'")
    try:
        cursor.execute(f'REINDEX INDEX CONCURRENTLY "{name}"')
    finally:
        cursor.execute("RESET maintenance_work_mem")


def _rebuild(schema_editor, options: str | None) -> None:
    with schema_editor.connection.cursor() as cursor:
        for name, valid in _indexes(cursor):
            if not valid and _LEFT_BY_REINDEX.search(name):
                cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
                continue
            own = OWN_NAME.match(name)
            if own is None:
                _rebuild_one(cursor, name, options)
                continue
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_CLASS, int(own.group(1))])
            try:
                _rebuild_one(cursor, name, options)
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_CLASS, int(own.group(1))])


def forwards(apps, schema_editor) -> None:
    _rebuild(schema_editor, TWELVE)


def backwards(apps, schema_editor) -> None:
    _rebuild(schema_editor, None)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("memories", "0010_occurred_at_kept")]

    operations = [migrations.RunPython(forwards, backwards)]
