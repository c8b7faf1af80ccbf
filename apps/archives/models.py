"""Account archives: the backups made of an account, the archives uploaded to import, and when backups are made.

Both models came from the sync app and keep its tables (migrations/0001_from_sync.py)."""

from django.conf import settings
from django.db import models

from apps.common.models import BackgroundJob


def _backup_path(instance: "Backup", filename: str) -> str:
    return f"backups/{instance.user_id}/{filename}"


class Backup(BackgroundJob):
    """An account archive (a zip: chats as SillyTavern JSONL, characters, memories with their chains, the settings
    document, tombstones) made here, or uploaded to import; and the jobs that restore or import one."""

    class Kind(models.TextChoices):
        BACKUP = "backup"  # an archive made of the account
        IMPORT = "import"  # an uploaded archive merged into the account
        RESTORE = "restore"  # a backup's content brought back

    class Trigger(models.TextChoices):
        MANUAL = "manual"
        AUTOMATIC = "automatic"
        UPLOAD = "upload"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="backups")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    stage = models.CharField(max_length=100, blank=True, default="", help_text="What it is doing now.")
    # A percentage, in place of the text other jobs keep (`stage` says what it is doing).
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done.")
    file = models.FileField(upload_to=_backup_path, blank=True, max_length=300)
    size = models.BigIntegerField(default=0)
    source = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="The restored backup."
    )
    counts = models.JSONField(default=dict, blank=True)

    class Meta(BackgroundJob.Meta):
        db_table = "sync_backup"  # the table it had in the sync app (migrations/0001)
        indexes = [models.Index(fields=["user", "-created_at"], name="backup_user_recent")]

    def __str__(self) -> str:
        return f"{self.kind} of {self.user} ({self.created_at:%Y-%m-%d %H:%M})"


class BackupSettings(models.Model):
    """ST-BME's two modes: automatic (an archive every so often, the oldest beyond `keep` removed) or manual
    (only when asked)."""

    class Mode(models.TextChoices):
        MANUAL = "manual"
        AUTOMATIC = "automatic"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="backup_settings")
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.MANUAL)
    every_hours = models.PositiveIntegerField(default=24)
    keep = models.PositiveSmallIntegerField(default=5, help_text="Backups kept; older ones are removed.")

    class Meta:
        db_table = "sync_backupsettings"
        verbose_name_plural = "backup settings"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(every_hours__gte=1, every_hours__lte=24 * 30), name="backup_every"
            ),
            models.CheckConstraint(condition=models.Q(keep__gte=1, keep__lte=100), name="backup_keep"),
        ]

    def __str__(self) -> str:
        return f"backups of {self.user}: {self.mode}"
