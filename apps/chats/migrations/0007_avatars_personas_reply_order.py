"""Characters' avatars, personas (a chat's persona), and a group chat's reply order. Only additions: new columns
with defaults (or NULL), a new table; no row is changed or lost."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import apps.chats.models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0006_write_path_content_types"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="character",
            name="avatar",
            field=models.FileField(
                blank=True,
                help_text="The card's image (a PNG card's own, or one uploaded): PNG, JPEG or WebP.",
                max_length=300,
                upload_to=apps.chats.models.avatar_path,
            ),
        ),
        migrations.AddField(
            model_name="chat",
            name="reply_order",
            field=models.CharField(
                choices=[
                    ("natural", "Natural (named first, else in turn)"),
                    ("manual", "Manual (you choose)"),
                ],
                default="natural",
                help_text="Who replies in a group chat: natural order, or the person chooses.",
                max_length=10,
            ),
        ),
        migrations.CreateModel(
            name="Persona",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("description", models.TextField(blank=True, default="")),
                (
                    "is_default",
                    models.BooleanField(default=False, help_text="New chats start with it (at most one per account)."),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="personas",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-is_default", "name", "id"],
            },
        ),
        migrations.AddField(
            model_name="chat",
            name="persona",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="chats",
                to="chats.persona",
            ),
        ),
        migrations.AddConstraint(
            model_name="chat",
            constraint=models.CheckConstraint(
                condition=models.Q(("reply_order__in", ["natural", "manual"])), name="chat_reply_order_valid"
            ),
        ),
        migrations.AddConstraint(
            model_name="persona",
            constraint=models.UniqueConstraint(
                condition=models.Q(("is_default", True)), fields=("user",), name="persona_one_default_per_user"
            ),
        ),
    ]
