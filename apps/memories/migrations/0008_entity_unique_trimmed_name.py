"""A registry holds one entity per name compared trimmed and in any case (0007 merged those that were not)."""

import django.db.models.functions.text
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memories", "0007_entity_duplicates_merged")]

    operations = [
        migrations.RemoveConstraint(model_name="entity", name="entity_unique_name_per_character"),
        migrations.AddConstraint(
            model_name="entity",
            constraint=models.UniqueConstraint(
                models.F("user"),
                models.F("character"),
                django.db.models.functions.text.Lower(django.db.models.functions.text.Trim("name")),
                name="entity_unique_name_per_registry",
                nulls_distinct=False,
            ),
        ),
    ]
