"""A user's LLM connections and the record of every call made through them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.llm.profiles import detect_profile
from apps.llm.sampler import REPLY_TOKENS_DEFAULT, SAMPLER_KEYS


class Profile(models.TextChoices):
    """Hardware profiles (as Smart Memory has them, docs/GLOSSARY.md): A is a local, Ollama-class model (small context,
    one call at a time), B a hosted one. The profile selects caps and dedup thresholds."""

    A = "A", "A · local (Ollama-class)"
    B = "B", "B · hosted"


class Connection(models.Model):
    class Api(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible (/v1)"
        OLLAMA = "ollama", "Ollama (/api/chat)"

    class ProfileChoice(models.TextChoices):
        AUTO = "auto", "Detect from the connection"
        A = "A", Profile.A.label
        B = "B", Profile.B.label

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_connections")
    name = models.CharField(max_length=100)
    api = models.CharField(max_length=10, choices=Api.choices, default=Api.OPENAI)
    base_url = models.URLField(max_length=500, help_text="e.g. https://api.openai.com/v1 or http://host:11434")
    model = models.CharField(max_length=200)
    api_key_encrypted = models.TextField(blank=True, default="")
    api_key_hint = models.CharField(max_length=12, blank=True, default="", help_text="The key's last characters.")
    profile = models.CharField(max_length=4, choices=ProfileChoice.choices, default=ProfileChoice.AUTO)
    context_window = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens; default by profile.")
    timeout = models.FloatField(null=True, blank=True, help_text="Seconds per attempt; default from settings.")
    reply_tokens = models.PositiveIntegerField(default=REPLY_TOKENS_DEFAULT, help_text="Reply length in tokens")
    # The person's samplers for a chat reply (apps/llm/sampler.py `sampler_clean` says which keys and ranges).
    sampler = models.JSONField(default=dict, blank=True)
    is_default = models.BooleanField(default=False, help_text="Used for background memory work.")
    # What the provider charges, for the estimates shown before background work spends anything.
    price_prompt = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, help_text="Price per million prompt tokens."
    )
    price_reply = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, help_text="Price per million reply tokens."
    )
    last_tested_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-is_default", "name", "id"]
        constraints = [
            models.UniqueConstraint("user", models.functions.Lower("name"), name="llm_connection_unique_name"),
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(is_default=True), name="llm_connection_one_default"
            ),
            models.CheckConstraint(condition=models.Q(api__in=["openai", "ollama"]), name="llm_connection_api"),
            models.CheckConstraint(condition=models.Q(profile__in=["auto", "A", "B"]), name="llm_connection_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.model})"

    @property
    def effective_profile(self) -> str:
        return self.profile if self.profile != self.ProfileChoice.AUTO else detect_profile(self.api, self.base_url)


class Call(models.Model):
    """One request to a model (with its retries): what was asked with which template, what came back (thinking
    stripped), how long it took, and the error if it failed. Kept LOREKEEPER_LLM["keep_calls_days"] days."""

    class Status(models.TextChoices):
        OK = "ok"
        ERROR = "error"
        STOPPED = "stopped"  # a streamed reply the person stopped: `response` holds what had come

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_calls")
    connection = models.ForeignKey(Connection, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls")
    purpose = models.CharField(max_length=50)
    template = models.CharField(max_length=100, blank=True, default="", help_text="name@version of the prompt.")
    model = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices)
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveSmallIntegerField(default=1)
    latency_ms = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    tokens_estimated = models.BooleanField(default=False, help_text="The server reported no usage: counted here.")
    response = models.TextField(blank=True, default="", help_text="The answer, think blocks stripped.")
    reasoning = models.TextField(blank=True, default="", help_text="What the model thought, kept apart.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="llm_call_user_recent")]

    def __str__(self) -> str:
        return f"{self.purpose} {self.status} ({self.created_at:%Y-%m-%d %H:%M})"


class SamplerPreset(models.Model):
    """A named set of sampler values (the keys of `Connection.sampler`) a person keeps to put on a connection."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sampler_presets")
    name = models.CharField(max_length=100)
    values = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint("user", models.functions.Lower("name"), name="llm_sampler_preset_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def summary(self) -> str:
        """ "temperature 0.8 · top_p 0.95 · 2 stop strings", or what an empty preset means."""
        parts = [
            f"{len(value)} stop string{'s' if len(value) != 1 else ''}" if key == "stop" else f"{key} {value:g}"
            for key in SAMPLER_KEYS  # in this order: PostgreSQL keeps a JSON object's keys in its own
            if (value := self.values.get(key)) is not None
        ]
        return " · ".join(parts) or "the model's own defaults"


class Budget(models.Model):
    """What background memory work may spend of a person's model budget (apps/llm/client.py refuses a background
    call past it; the extraction planner queues nothing)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_budget")
    daily_tokens = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="At most this many model tokens (prompt and reply) a day for background work; empty: no limit.",
    )

    def __str__(self) -> str:
        return f"budget of user {self.user_id}"
