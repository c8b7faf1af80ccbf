"""What a reply generated here remembers: the exact prompt it was given, how it went, and where it was stored."""

import uuid

from django.conf import settings
from django.db import models


class Generation(models.Model):
    """One reply asked of a person's model for a chat: a new message, a new swipe, a continuation or a drafted
    message of the person's (impersonate). Kept after the fact so that "Prompt" on a message shows what the model
    was given, and so that a retry with the same Idempotency-Key answers what the first request stored."""

    class Mode(models.TextChoices):
        NEW = "new"
        SWIPE = "swipe"
        CONTINUE = "continue"
        IMPERSONATE = "impersonate"

    class State(models.TextChoices):
        STREAMING = "streaming"
        DONE = "done"
        STOPPED = "stopped"  # the person stopped it: what arrived is kept
        FAILED = "failed"  # the model failed: what arrived is kept, `error` says why
        CONFLICT = "conflict"  # the chat moved on elsewhere meanwhile: the reply is kept here, not in the chat

    class Reason(models.TextChoices):
        """Why a reply ended before the model ended it (apps/generation/services/bounds.py)."""

        NONE = "", "—"
        LENGTH = "length"  # the connection's reply length, in tokens
        CHARACTERS = "characters"  # the message limit, in characters
        TIME = "time"  # the total time a generation may take
        IDLE = "idle"  # the model sent nothing for too long between tokens
        LEASE = "lease"  # the process streaming it died: its lease ran out
        SERVER = "server"  # a fault of Lorekeeper's own while relaying it, not the model's

    # The reasons a failed reply failed by a fault of Lorekeeper's own (relaying it, or the process streaming it
    # died), not the model's: answered 500 `server_error`, not 502 `model_failed`.
    OUR_FAULTS = (Reason.SERVER, Reason.LEASE)

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="generations")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="generations")
    connection = models.ForeignKey(
        "llm.Connection", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    mode = models.CharField(max_length=12, choices=Mode.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.STREAMING)
    character_name = models.CharField(max_length=200, blank=True, default="")
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    request = models.JSONField(default=dict, blank=True, help_text="What was asked: mode, message, character.")
    # The chat as the reply was asked for: a reply is stored only if the chat still has this many messages.
    expected_count = models.PositiveIntegerField(default=0)
    # A swipe or a continuation: the message it extends as it was asked ({"index", "hash", "chars"}); the reply is
    # stored only onto that message unchanged (apps/generation/services/store.py).
    extends = models.JSONField(default=dict, blank=True)
    message_index = models.IntegerField(null=True, blank=True, help_text="The message the reply was stored in.")
    swipe_id = models.IntegerField(null=True, blank=True)
    prompt = models.JSONField(default=list, blank=True, help_text="The messages the model was given, in order.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    tokenizer = models.CharField(max_length=60, blank=True, default="")
    prompt_info = models.JSONField(default=dict, blank=True, help_text="The budget and what the history kept.")
    text = models.TextField(blank=True, default="", help_text="What the model answered (so far).")
    error = models.TextField(blank=True, default="")
    stop_reason = models.CharField(max_length=12, choices=Reason.choices, blank=True, default="")
    # While streaming, the process streaming it renews this every few seconds and saves the text so far; past it,
    # the generation is taken for dead and ended failed (apps/generation/services/lease.py).
    lease_until = models.DateTimeField(null=True, blank=True)
    api = models.CharField(max_length=20, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="generation_idempotency_key_per_user",
            ),
        ]
        indexes = [
            models.Index(fields=["chat", "message_index"], name="generation_chat_message"),
            models.Index(
                fields=["user", "lease_until"], condition=models.Q(state="streaming"), name="generation_streaming"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.mode} reply in chat {self.chat_id} ({self.state})"
