"""Backups and their settings now belong to the archives app (apps/archives/migrations/0001_from_sync.py): the models
leave this app's state; their tables and rows stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sync", "0009_settings_document"),
        ("archives", "0001_from_sync"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="backupsettings", name="user"),
                migrations.DeleteModel(name="Backup"),
                migrations.DeleteModel(name="BackupSettings"),
            ],
            database_operations=[],
        ),
    ]
