"""The extraction pipeline's state: per-user settings, per-chat progress through the tiers, the jobs that do the
work (with their progress and errors), scenes with their recap versions, continuity checks, away recaps and
extraction model tests. What the tiers extract is stored as memories (apps.memories)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from apps.common.models import BackgroundJob


class AutoChoice(models.TextChoices):
    AUTO = "auto", "By profile (hosted: on, local: off)"
    ON = "on", "Always"
    OFF = "off", "Never (by hand only)"


class ExtractionSettings(models.Model):
    """How a user's chats are processed. Defaults follow Smart Memory's (docs/GLOSSARY.md) where it has one."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="extraction_settings")
    enabled = models.BooleanField(default=True, help_text="Extract memories from chats in the background.")
    auto_extract = models.BooleanField(
        default=False,
        help_text="Extract a chat's whole history without asking first (an import, or extraction switched on). "
        "Off: such a chat waits for Run, with an estimate of what it will cost.",
    )

    batch_every = models.PositiveSmallIntegerField(
        default=10, help_text="Run batch extraction every this many new messages (complete rounds in group chats)."
    )
    batch_max = models.PositiveSmallIntegerField(
        default=40, help_text="At most this many messages per pass when catching up (an imported chat)."
    )
    context_tokens = models.PositiveIntegerField(
        default=8192, help_text="Context size of the model you chat with: compaction keeps the chat inside it."
    )
    compaction_share = models.FloatField(
        default=0.8, help_text="Extend the rolling summary when the unsummarised chat passes this share of it."
    )
    scene_model_check = models.BooleanField(
        default=False, help_text="Ask the model to confirm each scene break the heuristics find."
    )
    min_scene_messages = models.PositiveSmallIntegerField(default=10, help_text="Shortest scene, in messages.")
    profile_every = models.PositiveSmallIntegerField(
        default=20, help_text="Rebuild character, world and relationship profiles every this many messages."
    )
    profile_stale_minutes = models.PositiveSmallIntegerField(
        default=30, help_text="Profiles older than this are rebuilt at the next new message."
    )
    canon_auto = models.CharField(
        max_length=4,
        choices=AutoChoice.choices,
        default=AutoChoice.AUTO,
        help_text="Rewrite canon when an arc resolves.",
    )
    continuity_auto = models.CharField(
        max_length=4,
        choices=AutoChoice.choices,
        default=AutoChoice.AUTO,
        help_text="Check every new reply against the card and the memories.",
    )
    recap_after_hours = models.FloatField(
        default=6.0, help_text="Offer a “Previously on…” recap when you return after this many hours."
    )
    auto_rebuild_max = models.PositiveSmallIntegerField(
        default=60,
        help_text="An edit, swipe or deletion at most this many messages before the newest extracted one is "
        "extracted again at once; older edits wait for “Rebuild from here”.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "extraction settings"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(compaction_share__gt=0, compaction_share__lte=1), name="extraction_share_range"
            ),
            models.CheckConstraint(condition=models.Q(batch_every__gte=1), name="extraction_batch_every_min"),
        ]

    def __str__(self) -> str:
        return f"extraction settings of {self.user}"


class ChatPipeline(models.Model):
    """Where one chat stands in each tier. `through[tier]` is the first message index the tier has not covered
    (`through["compaction"]` is Smart Memory's summaryEnd). `needs_plan` is the durable wake-up: set before a
    runner is asked for, cleared when the planner has looked, found by the sweep when a wake-up was lost."""

    chat = models.OneToOneField("chats.Chat", on_delete=models.CASCADE, related_name="pipeline")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    paused = models.BooleanField(default=False)
    auto_extract = models.BooleanField(
        default=False, help_text="Extract this chat's history without asking, however much arrives at once."
    )
    approved_through = models.PositiveIntegerField(
        null=True, blank=True, help_text="The person ran extraction of the messages before this index (Run)."
    )
    through = models.JSONField(default=dict, blank=True)
    needs_plan = models.BooleanField(default=True)
    profiles_built_at = models.DateTimeField(null=True, blank=True)
    canon_due = models.BooleanField(default=False, help_text="An arc resolved since canon was last written.")
    stale_from = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Messages from here on changed after extraction covered them, too far back to redo at once.",
    )
    last_active_at = models.DateTimeField(null=True, blank=True, help_text="When the person last opened the chat.")
    planned_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["needs_plan"], name="pipeline_needs_plan", condition=models.Q(needs_plan=True))
        ]

    def __str__(self) -> str:
        return f"pipeline of chat {self.chat_id}"

    @property
    def summary_end(self) -> int:
        return int(self.through.get("compaction", 0))


class PipelineJob(BackgroundJob):
    """One pass of one tier over one chat: queued, run by the chat's runner (one at a time per chat), then done,
    failed (after retries with backoff, with the error), discarded (the messages it read changed while it ran:
    its results were thrown away and the tier queued again) or cancelled (a rebuild or pause replaced it)."""

    class Tier(models.TextChoices):
        REBUILD = "rebuild", "rebuild from a message"
        RECAP = "recap", "away recap"
        CONTINUITY = "continuity", "continuity check"
        COMPACTION = "compaction", "T1 rolling summary"
        SESSION = "session", "T3 session memories"
        LONGTERM = "longterm", "T3 long-term memories"
        ARCS = "arcs", "T3 story arcs"
        LEDGER = "ledger", "T3 state ledger"
        SCENES = "scenes", "T2 scenes"
        EPISTEMIC = "epistemic", "T2 who knows what"
        PROFILES = "profiles", "T4 profiles"
        CANON = "canon", "T4 canon"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        DISCARDED = "discarded"
        CANCELLED = "cancelled"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pipeline_jobs")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="pipeline_jobs")
    tier = models.CharField(max_length=12, choices=Tier.choices)
    priority = models.PositiveSmallIntegerField(default=0, help_text="Lower runs first.")
    # Its own states: those of every job, and discarded and cancelled.
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    params = models.JSONField(default=dict, blank=True)
    manual = models.BooleanField(default=False, help_text="Asked for by a person.")
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, help_text="Retry after a failure not before.")
    result = models.JSONField(default=dict, blank=True)
    read_from = models.PositiveIntegerField(null=True, blank=True)
    read_to = models.PositiveIntegerField(null=True, blank=True)
    fingerprint = models.CharField(max_length=50, blank=True, default="", help_text="Of the messages it read.")
    llm_calls = ArrayField(models.BigIntegerField(), default=list, blank=True)

    class Meta(BackgroundJob.Meta):
        indexes = [
            models.Index(fields=["chat", "state", "priority"], name="pipeline_job_chat_state"),
            models.Index(fields=["user", "-created_at"], name="pipeline_job_user_recent"),
            models.Index(
                fields=["state", "next_attempt_at"],
                name="pipeline_job_pending",
                condition=models.Q(state__in=["queued", "running"]),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["queued", "running", "done", "failed", "discarded", "cancelled"]),
                name="pipeline_job_state_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tier} {self.state} (chat {self.chat_id})"

    @property
    def pending(self) -> bool:
        return self.state in (self.State.QUEUED, self.State.RUNNING)


class ExtractedBatch(models.Model):
    """The messages a batch tier made memories from (a done job's `result["range"]`, from `start` to `end`
    inclusive), kept when the job itself is forgotten (jobs_prune): an edit takes back the whole batch that held the
    edited message, from where that batch began (apps/extraction/services/batches.py)."""

    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="+")
    tier = models.CharField(max_length=12)
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField(help_text="Its last message.")

    class Meta:
        indexes = [models.Index(fields=["chat", "end"], name="extracted_batch_chat_end")]

    def __str__(self) -> str:
        return f"{self.tier} #{self.start}-#{self.end} (chat {self.chat_id})"


class Scene(models.Model):
    """A closed scene of a chat: messages [start_index, end_index), the break that ended it and why, and its
    recap versions (auto-recap's scene_recap_versions / scene_recap_current_index). The current
    version is also a `scene_recap` memory, linked to the memories extracted from the scene."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="scenes")
    start_index = models.PositiveIntegerField()
    end_index = models.PositiveIntegerField(help_text="The first message of the next scene.")
    name = models.CharField(max_length=200, blank=True, default="")
    cue = models.CharField(max_length=300, blank=True, default="", help_text="What the break was detected by.")
    model_confirmed = models.BooleanField(null=True, blank=True, help_text="The model's yes/no, when asked.")
    recap_versions = models.JSONField(default=list, blank=True)
    current_version = models.PositiveSmallIntegerField(default=0, help_text="Index into recap_versions.")
    recap_hash = models.CharField(max_length=50, blank=True, default="", help_text="Of the messages recapped.")
    recap_memory = models.ForeignKey(
        "memories.Memory", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source_memory_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    epistemic_done = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["chat", "start_index"]
        constraints = [models.UniqueConstraint(fields=["chat", "start_index"], name="scene_unique_start")]

    def __str__(self) -> str:
        return f"scene {self.start_index}–{self.end_index - 1} of chat {self.chat_id}"

    @property
    def recap(self) -> str:
        if not self.recap_versions:
            return ""
        index = min(self.current_version, len(self.recap_versions) - 1)
        return self.recap_versions[index].get("content", "")


class ContinuityCheck(models.Model):
    """A reply checked against the character card and the memories (T4 continuity). A repair note is a one-shot
    correction for the next generation: the context builder consumes it."""

    class Status(models.TextChoices):
        OK = "ok"
        CONTRADICTION = "contradiction"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="continuity_checks")
    message_index = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=50, blank=True, default="")
    status = models.CharField(max_length=15, choices=Status.choices)
    findings = models.JSONField(default=list, blank=True)
    repair_note = models.TextField(blank=True, default="")
    repair_consumed_at = models.DateTimeField(null=True, blank=True)
    llm_call = models.ForeignKey("llm.Call", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["chat", "-created_at"], name="continuity_chat_recent")]

    def __str__(self) -> str:
        return f"continuity of #{self.message_index}: {self.status}"


class Recap(models.Model):
    """A “Previously on…” for a person returning to a chat after `recap_after_hours`."""

    class State(models.TextChoices):
        PENDING = "pending"
        READY = "ready"
        FAILED = "failed"
        DISMISSED = "dismissed"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="recaps")
    away_since = models.DateTimeField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    text = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    llm_call = models.ForeignKey("llm.Call", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    dismissed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"recap of chat {self.chat_id} ({self.state})"


class ModelTest(BackgroundJob):
    """The extraction model test: fixed scenarios through every tier against one connection, writing nothing but
    this record (the raw answers, what parsed, and hints on the quality)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    connection = models.ForeignKey(
        "llm.Connection", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    connection_name = models.CharField(max_length=100, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    profile = models.CharField(max_length=1, blank=True, default="")
    results = models.JSONField(default=list, blank=True)
    started_at = None  # a model test records no start

    def __str__(self) -> str:
        return f"model test of {self.model} ({self.state})"
