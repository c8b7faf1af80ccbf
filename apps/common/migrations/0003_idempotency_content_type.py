"""IdempotencyRecord moved here from the sync app with its table; its content type, and with it the
permissions given on it and the admin's history, move too (apps/common/migration_ops.py)."""

from django.db import migrations

from apps.common.migration_ops import DEPENDENCIES, content_types_move


class Migration(migrations.Migration):
    dependencies = [("common", "0002_idempotency_record"), *DEPENDENCIES]

    operations = [content_types_move("sync", "common", "idempotencyrecord")]
