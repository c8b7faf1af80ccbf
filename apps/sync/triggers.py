"""The SQL of the sync feed's triggers, shared by the migrations that (re)create them."""

from __future__ import annotations

MEMORY_COLUMNS = (
    "kind, content, data, importance, time_scope, valid_from, valid_to, superseded_by_id, status, retired_reason, "
    "occurred_at, character_id, chat_id, version, source_instance, participating_instances, edited_by"
)
CHARACTER_COLUMNS = (
    "name, description, personality, scenario, first_mes, mes_example, system_prompt, creator_notes, tags, "
    "card_data, source_instance, participating_instances"
)
# A character's additional lorebooks, a column of chats 0009: sync 0012 makes the character's trigger with them. The
# migrations before it make it without (CHARACTER_COLUMNS, which they import, stays as they knew it).
CHARACTER_COLUMNS_WITH_BOOKS = f"{CHARACTER_COLUMNS}, extra_books"
SETTINGS_COLUMNS = "data, source_instance, participating_instances"
# A book's entries are rows of their own: a write to any of them moves the book's entries_version (below).
LOREBOOK_COLUMNS = "name, scope, extra, entries_version, source_instance, participating_instances"
# Set (SET LOCAL) by a write that restores objects as they were elsewhere (an archive import): their clocks are
# kept as written instead of counting the write as the server's.
QUIET = "current_setting('lorekeeper.sync_quiet', true) = 'on'"


def _row(prefix: str, columns: str) -> str:
    return "(" + ", ".join(f"{prefix}.{c.strip()}" for c in columns.split(",")) + ")"


def changed_function(name: str, feed_type: str, columns: str, skip: str = "FALSE") -> str:
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {skip} THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW.clock IS NULL OR NEW.clock = '{{}}'::jsonb THEN
            NEW.clock := '{{"server": 1}}'::jsonb;
        END IF;
        NEW.changed_at := coalesce(NEW.changed_at, clock_timestamp());
        PERFORM sync_feed_touch(NEW.user_id, '{feed_type}', NEW.uid);
        RETURN NEW;
    END IF;
    IF {_row("NEW", columns)} IS DISTINCT FROM {_row("OLD", columns)} THEN
        IF NEW.clock IS NOT DISTINCT FROM OLD.clock AND NOT coalesce({QUIET}, FALSE) THEN
            -- Not a sync write: the server's own change.
            NEW.clock := OLD.clock || jsonb_build_object('server', coalesce((OLD.clock ->> 'server')::bigint, 0) + 1);
            NEW.changed_by := '';
        END IF;
        IF NEW.changed_at IS NOT DISTINCT FROM OLD.changed_at AND NOT coalesce({QUIET}, FALSE) THEN
            NEW.changed_at := clock_timestamp();
        END IF;
        PERFORM sync_feed_touch(NEW.user_id, '{feed_type}', NEW.uid);
    ELSIF NEW.clock IS DISTINCT FROM OLD.clock THEN
        PERFORM sync_feed_touch(NEW.user_id, '{feed_type}', NEW.uid);
    END IF;
    RETURN NEW;
END $$;
"""


def deleted_function(name: str, feed_type: str, skip: str = "FALSE") -> str:
    """A deleted object's tombstone, its clock counting the deletion as the server's (a push's own deletion then
    writes the instance's clock over it: apps/sync/services/push/state.py `tombstone`)."""
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ({skip}) THEN
        PERFORM sync_feed_tombstone(
            OLD.user_id, '{feed_type}', OLD.uid,
            OLD.clock || jsonb_build_object('server', coalesce((OLD.clock ->> 'server')::bigint, 0) + 1), ''
        );
    END IF;
    RETURN OLD;
END $$;
"""


# Statement triggers: a book's thousands of entries written by one statement move its entries_version once.
LOREBOOK_ENTRIES = """
CREATE OR REPLACE FUNCTION sync_lorebook_entries_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE lorebooks_lorebook SET entries_version = entries_version + 1
        WHERE id IN (SELECT DISTINCT lorebook_id FROM old_rows);
    ELSE
        UPDATE lorebooks_lorebook SET entries_version = entries_version + 1
        WHERE id IN (SELECT DISTINCT lorebook_id FROM new_rows);
    END IF;
    RETURN NULL;
END $$;
"""


def changed_functions() -> str:
    return (
        changed_function("sync_memory_changed", "memory", MEMORY_COLUMNS, skip="NEW.kind = 'message'")
        + changed_function("sync_character_changed", "character", CHARACTER_COLUMNS)
        + changed_function("sync_settings_changed", "settings", SETTINGS_COLUMNS)
    )
