"""Backups and their settings move from the sync app to this one: the models only (state), their tables and rows stay
(`sync_backup`, `sync_backupsettings`); their content types and the permissions given on them move too."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import apps.archives.models
from apps.common.migration_ops import DEPENDENCIES, content_types_move


class Migration(migrations.Migration):
    initial = True

    dependencies = [("sync", "0009_settings_document"), *DEPENDENCIES]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Backup",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("done", "Done"),
                                    ("failed", "Failed"),
                                ],
                                default="queued",
                                max_length=10,
                            ),
                        ),
                        ("error", models.TextField(blank=True, default="")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "kind",
                            models.CharField(
                                choices=[("backup", "Backup"), ("import", "Import"), ("restore", "Restore")],
                                max_length=10,
                            ),
                        ),
                        (
                            "trigger",
                            models.CharField(
                                choices=[("manual", "Manual"), ("automatic", "Automatic"), ("upload", "Upload")],
                                max_length=10,
                            ),
                        ),
                        (
                            "stage",
                            models.CharField(
                                blank=True, default="", help_text="What it is doing now.", max_length=100
                            ),
                        ),
                        ("progress", models.PositiveSmallIntegerField(default=0, help_text="Percent done.")),
                        (
                            "file",
                            models.FileField(blank=True, max_length=300, upload_to=apps.archives.models._backup_path),
                        ),
                        ("size", models.BigIntegerField(default=0)),
                        ("counts", models.JSONField(blank=True, default=dict)),
                        (
                            "source",
                            models.ForeignKey(
                                blank=True,
                                help_text="The restored backup.",
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="archives.backup",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="backups",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "sync_backup",
                        "ordering": ["-created_at", "-id"],
                        "abstract": False,
                        "indexes": [models.Index(fields=["user", "-created_at"], name="backup_user_recent")],
                    },
                ),
                migrations.CreateModel(
                    name="BackupSettings",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "mode",
                            models.CharField(
                                choices=[("manual", "Manual"), ("automatic", "Automatic")],
                                default="manual",
                                max_length=10,
                            ),
                        ),
                        ("every_hours", models.PositiveIntegerField(default=24)),
                        (
                            "keep",
                            models.PositiveSmallIntegerField(
                                default=5, help_text="Backups kept; older ones are removed."
                            ),
                        ),
                        (
                            "user",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="backup_settings",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "backup settings",
                        "db_table": "sync_backupsettings",
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("every_hours__gte", 1), ("every_hours__lte", 720)),
                                name="backup_every",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("keep__gte", 1), ("keep__lte", 100)), name="backup_keep"
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        content_types_move("sync", "archives", "backup", "backupsettings"),
    ]
