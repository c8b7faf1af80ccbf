"""What the context builder remembers per chat: its last build (the content cache that macros and unified mode
read, and that a client can fetch again), the trim statistics of that build, and the running demand of each tier
that auto-tune sizes budgets from. The recall of a turn is kept on the user message itself
(`extra.bme_recall`), as ST-BME keeps it (docs/GLOSSARY.md, recall card)."""

from django.conf import settings
from django.db import models


class InjectionState(models.Model):
    chat = models.OneToOneField("chats.Chat", on_delete=models.CASCADE, related_name="injection_state")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    slots = models.JSONField(default=dict, blank=True, help_text="The last build's slots (the content cache).")
    macros = models.JSONField(default=dict, blank=True)
    stats = models.JSONField(default=dict, blank=True, help_text="Per tier: budget, injected and full tokens.")
    demand = models.JSONField(default=dict, blank=True, help_text="Per tier: running average of full tokens.")
    turn_type = models.CharField(max_length=12, blank=True, default="")
    builds = models.PositiveIntegerField(default=0)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-built_at"], name="injection_state_user_recent")]

    def __str__(self) -> str:
        return f"injection state of chat {self.chat_id}"
