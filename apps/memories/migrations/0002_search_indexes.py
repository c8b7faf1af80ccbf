from django.db import migrations

DIMENSIONS = (384, 768, 1024, 1536)


def _hnsw(dim: int) -> migrations.RunSQL:
    # Partial and on a cast, so vectors of one dimension share an index; searches must use the same expression
    # and the literal `embedding_dim = N` (apps/memories/search/candidates.py).
    return migrations.RunSQL(
        f"CREATE INDEX memory_embedding_{dim}_hnsw ON memories_memory "
        f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}",
        f"DROP INDEX memory_embedding_{dim}_hnsw",
    )


class Migration(migrations.Migration):
    """Full-text column and index beside the vectors; one HNSW cosine index per common dimension."""

    dependencies = [("memories", "0001_initial")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory ADD COLUMN search_vector tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED",
            "ALTER TABLE memories_memory DROP COLUMN search_vector",
        ),
        migrations.RunSQL(
            "CREATE INDEX memory_search_vector_gin ON memories_memory USING gin (search_vector)",
            "DROP INDEX memory_search_vector_gin",
        ),
        *(_hnsw(dim) for dim in DIMENSIONS),
    ]
