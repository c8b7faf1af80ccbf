"""A memory's `occurred_at` outside the years 2 to 9998 becomes unknown (NULL), as the moments Lorekeeper keeps
(apps/common/moments.py). Before them, a message dated "0001-01-01T00:00:00+14:00" was indexed as a moment of year 1
BC, which psycopg cannot read back: every list of its owner's memories answered a server error. The memories table's
sync trigger counts the change as the server's, so instances pull it."""

from django.db import migrations

OUTSIDE = "occurred_at < '0002-01-01 00:00:00+00' OR occurred_at >= '9999-01-01 00:00:00+00'"


class Migration(migrations.Migration):
    dependencies = [("memories", "0009_search_words_by_owner")]

    operations = [
        migrations.RunSQL(f"UPDATE memories_memory SET occurred_at = NULL WHERE {OUTSIDE}", migrations.RunSQL.noop),
    ]
