"""A character's additional lorebooks (chats 0009) are part of what a device syncs: the character's trigger counts a
change of them as a change of the character. Reversed, the trigger is made again without them.

Written by hand."""

from django.db import migrations

from apps.sync.triggers import CHARACTER_COLUMNS, CHARACTER_COLUMNS_WITH_BOOKS, changed_function


class Migration(migrations.Migration):
    dependencies = [("sync", "0011_lorebooks"), ("chats", "0009_character_extra_books")]

    operations = [
        migrations.RunSQL(
            changed_function("sync_character_changed", "character", CHARACTER_COLUMNS_WITH_BOOKS),
            changed_function("sync_character_changed", "character", CHARACTER_COLUMNS),
        )
    ]
