"""Memories 0011: every HNSW index of memories, the users' own too, rebuilt with 12 links a node and a build list of
48 (apps/memories/models.py HNSW_OPTIONS), without a row changing; and back with pgvector's defaults."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from apps.memories.embeddings import vector_literal
from apps.memories.models import HNSW_OPTIONS, Memory
from apps.memories.search.candidates import own_index_name
from apps.memories.services.memories import memory_create
from tests.chats.factories import CharacterFactory
from tests.memories.helpers import hnsw_indexes, unit
from tests.migrating import leaves, migrate

BEFORE = [("memories", "0010_occurred_at_kept")]
LEFT = "memory_embedding_384_hnsw_ccnew"
MIGRATION = importlib.import_module("apps.memories.migrations.0011_hnsw_twelve_links")
TWELVE = HNSW_OPTIONS.replace(" ", "").split(",")  # as PostgreSQL lists them: ["m=12", "ef_construction=48"]


def _nearest_through_an_index(name: str, user_id: int, query: list[float]) -> list[int]:
    """The three nearest of the user's vectors, ordered by an HNSW index (sorting and plain scans refused)."""
    where = "user_id = %s AND embedding_dim = 384"
    sql = f"SELECT id FROM memories_memory WHERE {where} ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 3"
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN " + sql, [user_id, vector_literal(query)])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert name in plan, plan
            cursor.execute(sql, [user_id, vector_literal(query)])
            return [row[0] for row in cursor.fetchall()]
        finally:
            cursor.execute("RESET enable_sort")
            cursor.execute("RESET enable_seqscan")


@pytest.mark.django_db
def test_a_migrated_database_has_the_options_on_every_index():
    assert MIGRATION.TWELVE == HNSW_OPTIONS  # the migration's own copy, which a later change must not alter
    indexes = hnsw_indexes()
    assert {f"memory_embedding_{dim}_hnsw" for dim in (384, 768, 1024, 1536)} <= set(indexes)
    assert all(options == TWELVE for _, options, _ in indexes.values()), indexes


@pytest.mark.django_db(transaction=True)
def test_the_migration_rebuilds_every_index_with_twelve_links_and_keeps_every_vector(user):
    today = leaves()
    character = CharacterFactory(user=user)
    own = own_index_name(user.pk, 384)
    try:
        migrate(BEFORE)
        vectors = {}
        for i in range(40):
            memory = memory_create(user=user, character=character, kind="fact", content=f"Memory {i}.")
            vectors[memory.pk] = unit(0.1 * (i % 7), 1 + i / 10, 0.3 * (i % 5), dim=384)
        with connection.cursor() as cursor:
            for pk, vector in vectors.items():
                cursor.execute(
                    "UPDATE memories_memory SET embedding = %s::vector, embedding_dim = 384 WHERE id = %s",
                    [vector_literal(vector), pk],
                )
            # A user's own index as the task built it before: pgvector's defaults.
            cursor.execute(
                f"CREATE INDEX {own} ON memories_memory USING hnsw ((embedding::vector(384)) vector_cosine_ops) "
                f"WHERE user_id = {user.pk} AND embedding_dim = 384"
            )
            # What a REINDEX CONCURRENTLY cut short leaves: an invalid copy, still written on every insert.
            cursor.execute(
                f"CREATE INDEX {LEFT} ON memories_memory USING hnsw ((embedding::vector(384)) vector_cosine_ops) "
                "WHERE embedding_dim = 384"
            )
            cursor.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [LEFT])
        before = hnsw_indexes()
        assert before.pop(LEFT)[2] is False
        assert before[own][1] is None and before["memory_embedding_384_hnsw"][1] is None
        stored = dict(Memory.objects.values_list("pk", "embedding"))

        migrate(today)

        after = hnsw_indexes()
        assert set(after) == set(before)
        for name, (oid, options, valid) in after.items():
            assert (options, valid) == (TWELVE, True), name
            assert oid != before[name][0], f"{name} was not rebuilt"
        assert {pk: list(vector) for pk, vector in Memory.objects.values_list("pk", "embedding")} == {
            pk: list(vector) for pk, vector in stored.items()
        }
        query = unit(0.2, 1.5, 0.3, dim=384)
        exact = sorted(vectors, key=lambda pk: -sum(a * b for a, b in zip(vectors[pk], query, strict=True)))[:3]
        assert _nearest_through_an_index(own, user.pk, query) == exact

        migrate(BEFORE)  # back: pgvector's defaults again
        assert all(options is None and valid for _, options, valid in hnsw_indexes().values())
    finally:
        migrate(today)
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {own}")
            cursor.execute(f"DROP INDEX IF EXISTS {LEFT}")
