"""Lorebooks join the sync feed: the book's own triggers as memories' and characters' (apps/sync/triggers.py), and
statement triggers on the entries that count a write to any entry as a change of its book. Every existing book goes
on the feed, unordered (the first pull numbers it).

Written by hand."""

from django.db import migrations, models

from apps.sync.triggers import LOREBOOK_COLUMNS, LOREBOOK_ENTRIES, changed_function, deleted_function

FORWARD = (
    changed_function("sync_lorebook_changed", "lorebook", LOREBOOK_COLUMNS)
    + deleted_function("sync_lorebook_deleted", "lorebook")
    + LOREBOOK_ENTRIES
    + """
CREATE TRIGGER sync_lorebook_changed BEFORE INSERT OR UPDATE ON lorebooks_lorebook
    FOR EACH ROW EXECUTE FUNCTION sync_lorebook_changed();
CREATE TRIGGER sync_lorebook_deleted AFTER DELETE ON lorebooks_lorebook
    FOR EACH ROW EXECUTE FUNCTION sync_lorebook_deleted();
CREATE TRIGGER sync_lorebook_entries_inserted AFTER INSERT ON lorebooks_lorebookentry
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sync_lorebook_entries_changed();
CREATE TRIGGER sync_lorebook_entries_updated AFTER UPDATE ON lorebooks_lorebookentry
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sync_lorebook_entries_changed();
CREATE TRIGGER sync_lorebook_entries_deleted AFTER DELETE ON lorebooks_lorebookentry
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION sync_lorebook_entries_changed();

INSERT INTO sync_feedentry (user_id, type, uid, seq, deleted_at, deleted_by, clock)
SELECT user_id, 'lorebook', uid, NULL::bigint, NULL::timestamptz, '', '{}'::jsonb FROM lorebooks_lorebook
ON CONFLICT (type, uid) DO NOTHING;
"""
)

BACKWARD = """
DROP TRIGGER IF EXISTS sync_lorebook_changed ON lorebooks_lorebook;
DROP TRIGGER IF EXISTS sync_lorebook_deleted ON lorebooks_lorebook;
DROP TRIGGER IF EXISTS sync_lorebook_entries_inserted ON lorebooks_lorebookentry;
DROP TRIGGER IF EXISTS sync_lorebook_entries_updated ON lorebooks_lorebookentry;
DROP TRIGGER IF EXISTS sync_lorebook_entries_deleted ON lorebooks_lorebookentry;
DROP FUNCTION IF EXISTS sync_lorebook_changed(), sync_lorebook_deleted(), sync_lorebook_entries_changed();
DELETE FROM sync_feedentry WHERE type = 'lorebook';
"""


class Migration(migrations.Migration):
    dependencies = [("sync", "0010_backups_to_archives"), ("lorebooks", "0002_sync")]

    operations = [
        migrations.AlterField(
            model_name="feedentry",
            name="type",
            field=models.CharField(
                choices=[
                    ("memory", "Memory"),
                    ("character", "Character"),
                    ("settings", "Settings"),
                    ("lorebook", "Lorebook"),
                ],
                max_length=20,
            ),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
