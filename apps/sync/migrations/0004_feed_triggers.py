"""The sync feed's triggers: every write to a synced object, by any code path (a service, a bulk update, a cascade),
puts it on its user's feed, and a write that does not set the object's clock itself is the server's and counts
under "server". Deleting an object leaves a tombstone. Message memories follow their chat and are not synced.

Written by hand; `sync_feed_seq` numbers the feed (see FeedEntry)."""

from django.db import migrations

from apps.sync.triggers import (
    CHARACTER_COLUMNS,
    MEMORY_COLUMNS,
    SETTINGS_COLUMNS,
    changed_function,
    deleted_function,
)

FORWARD = (
    """
CREATE SEQUENCE sync_feed_seq;

ALTER TABLE sync_feedentry ADD CONSTRAINT sync_feedentry_user_cascade
    FOREIGN KEY (user_id) REFERENCES auth_user (id) ON DELETE CASCADE;

-- On the feed, or back on it (ordered again) unless it is a tombstone: a tombstone is final.
CREATE OR REPLACE FUNCTION sync_feed_touch(p_user bigint, p_type text, p_uid uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sync_feedentry (user_id, type, uid, seq, deleted_at, deleted_by, clock)
    VALUES (p_user, p_type, p_uid, NULL, NULL, '', '{}'::jsonb)
    ON CONFLICT (type, uid) DO UPDATE SET seq = NULL
    WHERE sync_feedentry.deleted_at IS NULL AND sync_feedentry.seq IS NOT NULL;
END $$;

CREATE OR REPLACE FUNCTION sync_feed_tombstone(p_user bigint, p_type text, p_uid uuid, p_clock jsonb, p_by text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sync_feedentry (user_id, type, uid, seq, deleted_at, deleted_by, clock)
    VALUES (p_user, p_type, p_uid, NULL, clock_timestamp(), p_by, p_clock)
    ON CONFLICT (type, uid) DO UPDATE
    SET seq = NULL, deleted_at = EXCLUDED.deleted_at, deleted_by = EXCLUDED.deleted_by, clock = EXCLUDED.clock
    WHERE sync_feedentry.deleted_at IS NULL;
END $$;
"""
    + changed_function("sync_memory_changed", "memory", MEMORY_COLUMNS, skip="NEW.kind = 'message'")
    + deleted_function("sync_memory_deleted", "memory", skip="OLD.kind = 'message'")
    + changed_function("sync_character_changed", "character", CHARACTER_COLUMNS)
    + deleted_function("sync_character_deleted", "character")
    + changed_function("sync_settings_changed", "settings", SETTINGS_COLUMNS)
    + """
CREATE TRIGGER sync_memory_changed BEFORE INSERT OR UPDATE ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION sync_memory_changed();
CREATE TRIGGER sync_memory_deleted AFTER DELETE ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION sync_memory_deleted();
CREATE TRIGGER sync_character_changed BEFORE INSERT OR UPDATE ON chats_character
    FOR EACH ROW EXECUTE FUNCTION sync_character_changed();
CREATE TRIGGER sync_character_deleted AFTER DELETE ON chats_character
    FOR EACH ROW EXECUTE FUNCTION sync_character_deleted();
CREATE TRIGGER sync_settings_changed BEFORE INSERT OR UPDATE ON sync_settingsdocument
    FOR EACH ROW EXECUTE FUNCTION sync_settings_changed();

-- What exists already goes on the feed (unordered: the first pull numbers it).
INSERT INTO sync_feedentry (user_id, type, uid, seq, deleted_at, deleted_by, clock)
SELECT user_id, 'memory', uid, NULL::bigint, NULL::timestamptz, '', '{}'::jsonb FROM memories_memory WHERE kind <> 'message'
UNION ALL
SELECT user_id, 'character', uid, NULL::bigint, NULL::timestamptz, '', '{}'::jsonb FROM chats_character
UNION ALL
SELECT user_id, 'settings', uid, NULL::bigint, NULL::timestamptz, '', '{}'::jsonb FROM sync_settingsdocument;
"""
)

BACKWARD = """
DROP TRIGGER IF EXISTS sync_memory_changed ON memories_memory;
DROP TRIGGER IF EXISTS sync_memory_deleted ON memories_memory;
DROP TRIGGER IF EXISTS sync_character_changed ON chats_character;
DROP TRIGGER IF EXISTS sync_character_deleted ON chats_character;
DROP TRIGGER IF EXISTS sync_settings_changed ON sync_settingsdocument;
DROP FUNCTION IF EXISTS sync_memory_changed(), sync_memory_deleted(), sync_character_changed(),
    sync_character_deleted(), sync_settings_changed();
DROP FUNCTION IF EXISTS sync_feed_touch(bigint, text, uuid), sync_feed_tombstone(bigint, text, uuid, jsonb, text);
ALTER TABLE sync_feedentry DROP CONSTRAINT IF EXISTS sync_feedentry_user_cascade;
DROP SEQUENCE IF EXISTS sync_feed_seq;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("sync", "0003_feed"),
        ("memories", "0006_sync"),
        ("chats", "0003_sync"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
