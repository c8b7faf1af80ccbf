# Written by hand: the uid of every existing row is its own.

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0005_origin_changed_from"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="clock",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="memory",
            name="changed_at",
            field=models.DateTimeField(blank=True, help_text="When its content last changed (sync's LWW).", null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="changed_by",
            field=models.CharField(
                blank=True, default="", help_text="The instance of its last change (empty: the server).", max_length=64
            ),
        ),
        migrations.AddField(
            model_name="memory",
            name="edited_by",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Who last corrected it by hand: an instance, or 'web'.",
                max_length=64,
            ),
        ),
        # A uid of its own for every existing row (a default in AddField would give them all the same one).
        migrations.AddField(model_name="memory", name="uid", field=models.UUIDField(null=True, editable=False)),
        migrations.RunSQL("UPDATE memories_memory SET uid = gen_random_uuid()", migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="memory",
            name="uid",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
        # Existing rows: the server wrote each version of them.
        migrations.RunSQL(
            "UPDATE memories_memory SET clock = jsonb_build_object('server', version), changed_at = updated_at "
            "WHERE kind <> 'message'",
            migrations.RunSQL.noop,
        ),
    ]
