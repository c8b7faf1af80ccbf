"""A generation's stop reason may be `server`: a fault of Lorekeeper's own while relaying the reply, told apart from
the model failing. Only the field's choices change: no row and no column does."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("generation", "0002_lease_bounds_extends"),
    ]

    operations = [
        migrations.AlterField(
            model_name="generation",
            name="stop_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "—"),
                    ("length", "Length"),
                    ("characters", "Characters"),
                    ("time", "Time"),
                    ("idle", "Idle"),
                    ("lease", "Lease"),
                    ("server", "Server"),
                ],
                default="",
                max_length=12,
            ),
        ),
    ]
