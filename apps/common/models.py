"""Fields shared across apps."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class Synced(models.Model):
    """What multi-instance sync keeps on every object it carries (memories, characters, the settings document).

    `clock` is a vector clock, `{instance key: counter}`; the server's own writes count under "server". Database
    triggers (apps/sync migrations) keep it, `changed_at` and `changed_by` for every write that does not set them
    itself (a page, the extraction pipeline, a bulk update), and put the object on the user's sync feed; sync's
    own writes set them from the instance that pushed."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    clock = models.JSONField(default=dict, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True, help_text="When its content last changed (sync's LWW).")
    changed_by = models.CharField(
        max_length=64, blank=True, default="", help_text="The instance of its last change (empty: the server)."
    )
    source_instance = models.CharField(max_length=100, blank=True, default="")
    participating_instances = ArrayField(models.CharField(max_length=100), default=list, blank=True)

    class Meta:
        abstract = True


class BackgroundJob(models.Model):
    """What every record of background work keeps: its state, what it is doing now, the error that stopped it, and
    when it was made, started and finished; listed newest first. A job whose states or progress differ declares its
    own field in place of the shared one (PipelineJob's six states, a Backup's percentage); the model test records
    no start (`started_at = None`). Adopting it changed no column: each model's fields are as its migrations made
    them."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress = models.CharField(max_length=200, blank=True, default="")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


class IdempotencyRecord(models.Model):
    """The first successful answer to a write sent with an Idempotency-Key, replayed to retries of it
    (apps/common/idempotency.py). Its table kept the name it had in the sync app."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of method, path and body.")
    status = models.PositiveSmallIntegerField()
    body = models.JSONField(null=True)
    headers = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "sync_idempotencyrecord"
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")]

    def __str__(self) -> str:
        return self.key
