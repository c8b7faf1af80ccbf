"""What multi-device sync keeps: the instances and the feed."""

from django.conf import settings
from django.db import models


class InstanceKind(models.TextChoices):
    BROWSER = "browser"
    DESKTOP = "desktop"
    PHONE = "phone"
    COMPANION = "companion"
    SCRIPT = "script"
    OTHER = "other"


class Instance(models.Model):
    """A client of one user that keeps a local cache and syncs it (entity-core's embodiment, docs/GLOSSARY.md): a
    browser on a machine, a phone, a local companion app. `key` is the id the client names itself by in clocks and
    tags."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sync_instances")
    key = models.CharField(max_length=64)
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=InstanceKind.choices, default=InstanceKind.OTHER)
    priority = models.IntegerField(default=0, help_text="Breaks ties of last-write-wins: the higher wins.")
    pulled_seq = models.BigIntegerField(default=0, help_text="How far it has pulled the feed (its cursor).")
    pulled_items = models.BigIntegerField(default=0)
    pushed_items = models.BigIntegerField(default=0)
    last_pull_at = models.DateTimeField(null=True, blank=True)
    last_push_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-priority", "key"]
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="sync_instance_key_per_user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.key})"


class FeedType(models.TextChoices):
    MEMORY = "memory"
    CHARACTER = "character"
    SETTINGS = "settings"
    LOREBOOK = "lorebook"


class FeedEntry(models.Model):
    """The user's sync feed: one row per synced object, kept by database triggers on the objects' tables.

    `seq` is NULL while the object has a change no pull has ordered yet; a pull first numbers those (only rows
    committed by then, under a lock per user), then reads `seq > cursor`: a cursor never passes a change that
    commits later. `deleted_at` makes the row a tombstone: the object is gone and never comes back under this uid.
    The user column has a real ON DELETE CASCADE in the database (made by the migration): rows written by the
    triggers while an account is being deleted go with it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    type = models.CharField(max_length=20, choices=FeedType.choices)
    uid = models.UUIDField()
    seq = models.BigIntegerField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_by = models.CharField(max_length=64, blank=True, default="")
    clock = models.JSONField(default=dict, blank=True, help_text="A tombstone's: the clock the object ended at.")

    class Meta:
        verbose_name_plural = "feed entries"
        constraints = [models.UniqueConstraint(fields=["type", "uid"], name="sync_feed_one_per_object")]
        indexes = [
            models.Index(fields=["user", "seq"], name="sync_feed_user_seq"),
            models.Index(fields=["user"], name="sync_feed_unordered", condition=models.Q(seq__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.uid}{' (deleted)' if self.deleted_at else ''}"
