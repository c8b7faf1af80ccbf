"""ChatRevision and SeenGeneration moved here from the sync app with their tables; their content types, and with
them the permissions given on them and the admin's history, move too (apps/common/migration_ops.py)."""

from django.db import migrations

from apps.common.migration_ops import DEPENDENCIES, content_types_move


class Migration(migrations.Migration):
    dependencies = [("chats", "0005_write_path_models"), *DEPENDENCIES]

    operations = [content_types_move("sync", "chats", "chatrevision", "seengeneration")]
