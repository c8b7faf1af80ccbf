"""The chat write path's records move here from the sync app: revisions kept before a chat is replaced, and the
generation ids appends carried. The models only (state): their tables and rows stay as they are."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0004_client_key"),
        ("sync", "0007_idempotency_record_to_common"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ChatRevision",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("reason", models.CharField(max_length=100)),
                        ("integrity", models.UUIDField(help_text="The replaced version's integrity.")),
                        ("message_count", models.PositiveIntegerField()),
                        ("jsonl_gzip", models.BinaryField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "chat",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="revisions", to="chats.chat"
                            ),
                        ),
                    ],
                    options={"db_table": "sync_chatrevision", "ordering": ["-created_at", "-id"]},
                ),
                migrations.CreateModel(
                    name="SeenGeneration",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("generation_id", models.CharField(max_length=200)),
                        ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        (
                            "chat",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="seen_generations",
                                to="chats.chat",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "sync_seengeneration",
                        "constraints": [
                            models.UniqueConstraint(fields=("chat", "generation_id"), name="seen_generation_unique")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
