"""What incremental sync keeps beside the chats: seen generation ids, idempotent answers, forced-save revisions,
and each user's settings document."""

import uuid

from django.conf import settings
from django.db import models

from apps.chats.models import Chat


class SeenGeneration(models.Model):
    """A generation id an append carried: a retry with the same id is recognised even after a restart."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="seen_generations")
    generation_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat", "generation_id"], name="seen_generation_unique")]

    def __str__(self) -> str:
        return self.generation_id


class IdempotencyRecord(models.Model):
    """The first successful answer to a write sent with an Idempotency-Key, replayed to retries of it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of method, path and body.")
    status = models.PositiveSmallIntegerField()
    body = models.JSONField(null=True)
    headers = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")]

    def __str__(self) -> str:
        return self.key


class ChatRevision(models.Model):
    """A chat as it was before a forced save replaced it: gzipped SillyTavern JSONL, restorable."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="revisions")
    reason = models.CharField(max_length=100)
    integrity = models.UUIDField(help_text="The replaced version's integrity.")
    message_count = models.PositiveIntegerField()
    jsonl_gzip = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.chat} before {self.reason} ({self.created_at:%Y-%m-%d %H:%M})"


class SettingsDocument(models.Model):
    """A user's settings, one JSON object namespaced by extension (`{"smartMemory": {...}, "st_bme": {...}}`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="settings_document")
    data = models.JSONField(default=dict)
    integrity = models.UUIDField(default=uuid.uuid4)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"settings of {self.user}"
