"""IdempotencyRecord now belongs to the common app (apps/common/migrations/0002): the model leaves this app's state;
its table and rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sync", "0006_quiet_writes"),
        ("common", "0002_idempotency_record"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="IdempotencyRecord")],
            database_operations=[],
        ),
    ]
