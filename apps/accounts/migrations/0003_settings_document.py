"""The settings document moves here from the sync app: the model only (state), its table, rows and triggers stay."""

import uuid

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_audit"),
        ("sync", "0008_write_path_models_to_chats"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="SettingsDocument",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("uid", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("clock", models.JSONField(blank=True, default=dict)),
                        (
                            "changed_at",
                            models.DateTimeField(
                                blank=True, help_text="When its content last changed (sync's LWW).", null=True
                            ),
                        ),
                        (
                            "changed_by",
                            models.CharField(
                                blank=True,
                                default="",
                                help_text="The instance of its last change (empty: the server).",
                                max_length=64,
                            ),
                        ),
                        ("source_instance", models.CharField(blank=True, default="", max_length=100)),
                        (
                            "participating_instances",
                            django.contrib.postgres.fields.ArrayField(
                                base_field=models.CharField(max_length=100), blank=True, default=list, size=None
                            ),
                        ),
                        ("data", models.JSONField(default=dict)),
                        ("integrity", models.UUIDField(default=uuid.uuid4)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "user",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="settings_document",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "sync_settingsdocument",
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
