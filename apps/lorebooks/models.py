"""Lorebooks (SillyTavern's World Info) and their entries, per account (docs/LOREBOOKS.md).

An entry is kept as SillyTavern's JSON object (`data`), checked on the way in (services/fields.py): the activation
reads the same fields SillyTavern reads, and an export gives back every key that was imported.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.common.models import Synced


class Lorebook(Synced):
    """A World Info book. Multi-device sync carries it whole (apps/sync): its clock counts every change to the book
    or to any of its entries, which a database trigger on the entries records by moving `entries_version`."""

    class Scope(models.TextChoices):
        LINKED = "linked", "When a chat or character links it"
        GLOBAL = "global", "In every chat"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="lorebooks")
    name = models.CharField(
        max_length=200, help_text="SillyTavern's file name without .json: chats and cards link a book by it."
    )
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.LINKED)
    extra = models.JSONField(default=dict, blank=True, help_text="The file's keys besides `entries`, kept as given.")
    entries_version = models.BigIntegerField(
        default=0, editable=False, help_text="Moved by a database trigger on every write to the book's entries."
    )
    client_digest = models.CharField(
        max_length=64, blank=True, default="", editable=False,
        help_text="The digest of the book as a client (SillyTavern) last sent it: sent again unchanged, it is not "
        "imported over what was edited here since.",
    )  # fmt: skip
    client_export_digest = models.CharField(
        max_length=64, blank=True, default="", editable=False,
        help_text="The digest of this book's export once the client's copy was taken: another one means it was "
        "edited here since, and a new copy from the client keeps this version as a revision.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="lorebook_name_unique_per_user")]

    def __str__(self) -> str:
        return self.name


class LorebookEntry(models.Model):
    lorebook = models.ForeignKey(Lorebook, on_delete=models.CASCADE, related_name="entries")
    uid = models.PositiveIntegerField(help_text="SillyTavern's uid: the key of the entry in the file.")
    data = models.JSONField(help_text="The entry as SillyTavern writes it, checked.")

    class Meta:
        ordering = ["uid"]
        constraints = [models.UniqueConstraint(fields=["lorebook", "uid"], name="lorebook_entry_uid_unique")]
        verbose_name_plural = "lorebook entries"

    def __str__(self) -> str:
        return self.data.get("comment") or ", ".join(self.data.get("key") or []) or f"entry {self.uid}"


class LorebookRevision(models.Model):
    """A book's content as it was before something replaced it that cannot give it back (SillyTavern's copy sent
    over a version edited here, a restore of an older one): restorable, and downloadable as a World Info file."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    lorebook = models.ForeignKey(Lorebook, on_delete=models.CASCADE, related_name="revisions")
    data = models.JSONField(help_text="The book as its World Info file (its export) at the time.")
    entry_count = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["lorebook", "-created_at"], name="lorebook_revision_recent")]

    def __str__(self) -> str:
        return f"{self.lorebook} ({self.created_at:%Y-%m-%d %H:%M})"
