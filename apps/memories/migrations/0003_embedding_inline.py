from django.db import migrations


class Migration(migrations.Migration):
    """The columns search reads row by row, the vector and the full-text vector, kept in the table row rather than
    the TOAST table.

    pgvector's type defaults to EXTERNAL storage, and a 384-dimension vector (1.5 kB) with the text made most rows
    pass the 2 kB TOAST threshold: the vector went out of line, and every distance computed from the row (the exact
    scan computes one per query sentence) read it again through the TOAST index. MAIN keeps both inline unless the
    row could not fit a page at all; it is the content (EXTENDED) that goes out of line on long rows, and search
    reads content only for the results. Rows written before this keep their layout until they are next written
    (re-embedding rewrites the vector); no data changes."""

    dependencies = [("memories", "0002_search_indexes")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE MAIN, "
            "ALTER COLUMN search_vector SET STORAGE MAIN",
            "ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE EXTERNAL, "
            "ALTER COLUMN search_vector SET STORAGE EXTENDED",
        ),
    ]
