"""IdempotencyRecord moves from the sync app to common: the model only (state), the table and its rows stay."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0001_vector_extension"),
        ("sync", "0006_quiet_writes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="IdempotencyRecord",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("key", models.CharField(max_length=200)),
                        (
                            "fingerprint",
                            models.CharField(help_text="SHA-256 of method, path and body.", max_length=64),
                        ),
                        ("status", models.PositiveSmallIntegerField()),
                        ("body", models.JSONField(null=True)),
                        ("headers", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "sync_idempotencyrecord",
                        "constraints": [
                            models.UniqueConstraint(fields=("user", "key"), name="idempotency_key_unique_per_user")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
