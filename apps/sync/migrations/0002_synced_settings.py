# Written by hand: the uid of every existing row is its own.

import uuid

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sync", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="settingsdocument",
            name="clock",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="settingsdocument",
            name="changed_at",
            field=models.DateTimeField(blank=True, help_text="When its content last changed (sync's LWW).", null=True),
        ),
        migrations.AddField(
            model_name="settingsdocument",
            name="changed_by",
            field=models.CharField(
                blank=True, default="", help_text="The instance of its last change (empty: the server).", max_length=64
            ),
        ),
        migrations.AddField(
            model_name="settingsdocument",
            name="source_instance",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
        migrations.AddField(
            model_name="settingsdocument",
            name="participating_instances",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=100), blank=True, default=list, size=None
            ),
        ),
        # A uid of its own for every existing row (a default in AddField would give them all the same one).
        migrations.AddField(
            model_name="settingsdocument", name="uid", field=models.UUIDField(null=True, editable=False)
        ),
        migrations.RunSQL("UPDATE sync_settingsdocument SET uid = gen_random_uuid()", migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="settingsdocument",
            name="uid",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
        # Existing rows: the server wrote them, once.
        migrations.RunSQL(
            "UPDATE sync_settingsdocument SET clock = '{\"server\": 1}'::jsonb, changed_at = updated_at",
            migrations.RunSQL.noop,
        ),
    ]
