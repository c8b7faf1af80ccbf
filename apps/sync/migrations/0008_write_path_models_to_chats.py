"""ChatRevision and SeenGeneration now belong to the chats app (apps/chats/migrations/0005_write_path_models.py):
they leave this app's state; their tables and rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sync", "0007_idempotency_record_to_common"),
        ("chats", "0005_write_path_models"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ChatRevision"),
                migrations.DeleteModel(name="SeenGeneration"),
            ],
            database_operations=[],
        ),
    ]
