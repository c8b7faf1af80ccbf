"""The full-text index holds each memory's owner as one more word, so a text search reads only its user's rows.

Its words indexed alone, a search for common words read every user's rows holding them from the index and then threw
away the other users' ones: the text side of a search grew with other users' data (bench/memory_search.py
--isolation). The index is on an expression; searches must use the same one (OWN_WORDS in
apps/memories/search/candidates.py). No row changes: the index is built from the stored column."""

from django.db import migrations

OWN_WORDS = "(search_vector || array_to_tsvector(ARRAY['user ' || user_id::text]))"


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_entity_unique_trimmed_name")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX memory_own_words_gin ON memories_memory USING gin ({OWN_WORDS})",
            "DROP INDEX memory_own_words_gin",
        ),
        migrations.RunSQL(
            "DROP INDEX memory_search_vector_gin",
            "CREATE INDEX memory_search_vector_gin ON memories_memory USING gin (search_vector)",
        ),
    ]
