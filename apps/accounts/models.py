import uuid

from django.conf import settings
from django.db import models

from apps.common.models import Synced


class ApiToken(models.Model):
    """A personal API token. Only a SHA-256 digest is stored; the token itself is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="The first characters of the token, to recognise it by.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEvent(models.Model):
    """Security events staff can review: API tokens made and revoked, sign-ins paused after failures, accounts
    switched off. Changes made through the admin are in Django's own admin log (also shown to staff)."""

    class Action(models.TextChoices):
        TOKEN_CREATED = "token.created"
        TOKEN_REVOKED = "token.revoked"
        LOGIN_LOCKED = "login.locked"
        USER_DEACTIVATED = "user.deactivated"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
        help_text="Whose account it concerns.",
    )
    action = models.CharField(max_length=40, choices=Action.choices)
    target = models.CharField(max_length=200, blank=True, default="", help_text="What it acted on (never a secret).")
    ip = models.GenericIPAddressField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.target}"


class SettingsDocument(Synced):
    """A user's settings, one JSON object namespaced by extension (`{"smartMemory": {...}, "st_bme": {...}}`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="settings_document")
    data = models.JSONField(default=dict)
    integrity = models.UUIDField(default=uuid.uuid4)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "sync_settingsdocument"  # the name it had in the sync app

    def __str__(self) -> str:
        return f"settings of {self.user}"
