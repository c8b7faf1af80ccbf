"""SettingsDocument now belongs to the accounts app (apps/accounts/migrations/0003_settings_document.py): it leaves
this app's state; its table, rows and triggers stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("sync", "0008_write_path_models_to_chats"),
        ("accounts", "0003_settings_document"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="SettingsDocument")],
            database_operations=[],
        ),
    ]
