"""Every HNSW index of memories rebuilt with 12 links a node and a build list of 48, not pgvector's 16 and 64
(apps/memories/models.py HNSW_OPTIONS says why).

The options are set on each index, then the index is rebuilt without blocking writes (REINDEX CONCURRENTLY, so the
migration runs outside a transaction): searches keep the old graph until the new one replaces it, and no row
changes. The users' own indexes are rebuilt too. An index left invalid by an interrupted build gets the options
only: nothing searches it, and the task that builds a user's index drops and builds it again."""

import re

from django.db import migrations

TWELVE = "m = 12, ef_construction = 48"
MAX_BUILD_MB = 2048


def _rebuild(schema_editor, options: str | None) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, i.indisvalid, c.reltuples
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid
            JOIN pg_am am ON am.oid = c.relam
            WHERE i.indrelid = 'memories_memory'::regclass AND am.amname = 'hnsw'
            ORDER BY c.relname
            """
        )
        for name, valid, rows in cursor.fetchall():
            setting = f"SET ({options})" if options else "RESET (m, ef_construction)"
            cursor.execute(f'ALTER INDEX "{name}" {setting}')
            if not valid:
                continue
            # The graph built in memory, as a user's own index is (apps/memories/services/own_indexes.py): each
            # vector's dimensions (in the index's name) at 4 bytes each, and its links.
            found = re.search(r"_(\d+)_hnsw$", name)
            dim = int(found.group(1)) if found else 1536
            memory_mb = min(MAX_BUILD_MB, 64 + max(int(rows), 0) * (4 * dim + 512) // 2**20)
            cursor.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
            try:
                cursor.execute(f'REINDEX INDEX CONCURRENTLY "{name}"')
            finally:
                cursor.execute("RESET maintenance_work_mem")


def forwards(apps, schema_editor) -> None:
    _rebuild(schema_editor, TWELVE)


def backwards(apps, schema_editor) -> None:
    _rebuild(schema_editor, None)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("memories", "0010_occurred_at_kept")]

    operations = [migrations.RunPython(forwards, backwards)]
