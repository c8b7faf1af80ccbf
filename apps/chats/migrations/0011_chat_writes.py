"""Each chat's count of writes (Chat.writes), which clients compare to tell a copy gone back in time (a database
restored from an older backup) from another device's deletions. Existing chats start at 0 and count on from their
next write. Adding a column with a constant default changes no row on PostgreSQL 11 and later, and the column has
no CHECK to verify, so the chat table is locked only for a moment (once the lock is had: the ALTER waits for open
transactions on the table first), and nothing is lost. The default stays in the database, so a process of the
previous release still serving during a rolling deploy creates chats as before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0010_message_text_digest"),
    ]

    operations = [
        migrations.AddField(
            model_name="chat",
            name="writes",
            field=models.BigIntegerField(
                default=0,
                db_default=0,
                editable=False,
                help_text="How many writes the chat has had. It only grows, so a client that saw a higher number than "
                "the chat shows is looking at a copy that went back in time: a database restored from an older "
                "backup.",
            ),
        ),
    ]
