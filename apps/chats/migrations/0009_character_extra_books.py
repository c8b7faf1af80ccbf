from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0008_persona_lorebook"),
    ]

    operations = [
        migrations.AddField(
            model_name="character",
            name="extra_books",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Its additional lorebooks, by name, scanned with the book its card links (SillyTavern's "
                "per-character Additional Lorebooks, which SillyTavern keeps beside the card, not in it).",
            ),
        ),
    ]
