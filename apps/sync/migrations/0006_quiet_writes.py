"""The triggers learn `lorekeeper.sync_quiet`: a write that restores objects as they were elsewhere (an archive
import linking its memories' chains) keeps their clocks instead of counting as the server's change."""

from django.db import migrations

from apps.sync.triggers import changed_functions


class Migration(migrations.Migration):
    dependencies = [("sync", "0005_backups")]

    operations = [migrations.RunSQL(changed_functions(), migrations.RunSQL.noop)]
