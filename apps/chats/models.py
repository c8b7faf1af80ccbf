"""Characters, chats and messages, shaped after SillyTavern's JSONL chat files.

Every key of an imported line is kept: the keys SillyTavern defines live in typed columns (so they can be queried
and edited), anything else in `other_fields`, and `absent_fields` remembers which of the typed keys the line did
not have, so an export writes back exactly the JSON value that was imported (see apps/chats/jsonl.py).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models.functions import MD5

from apps.common.models import Synced


def avatar_path(instance: Character, filename: str) -> str:
    """Under the owner's folder, named at random: MEDIA is never served directly (apps/chats/views/characters.py
    serves an avatar to its owner only), and the name says nothing of the character."""
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else "png"
    return f"avatars/{instance.user_id}/{uuid.uuid4().hex}.{suffix}"


class Character(Synced):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="characters")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    personality = models.TextField(blank=True)
    scenario = models.TextField(blank=True)
    first_mes = models.TextField(blank=True)
    mes_example = models.TextField(blank=True)
    system_prompt = models.TextField(blank=True)
    creator_notes = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    card_data = models.JSONField(
        default=dict, blank=True, help_text="The card as imported (V1/V2/V3 JSON), or any other card data, verbatim."
    )
    extra_books = models.JSONField(
        default=list,
        blank=True,
        help_text="Its additional lorebooks, by name, scanned with the book its card links (SillyTavern's "
        "per-character Additional Lorebooks, which SillyTavern keeps beside the card, not in it).",
    )
    avatar = models.FileField(
        upload_to=avatar_path,
        blank=True,
        max_length=300,
        help_text="The card's image (a PNG card's own, or one uploaded): PNG, JPEG or WebP.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["user", "name"])]

    def __str__(self) -> str:
        return self.name


class Persona(models.Model):
    """Who the person plays in a chat (SillyTavern's persona): its name is the chat's `user_name` and `{{user}}`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personas")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    is_default = models.BooleanField(default=False, help_text="New chats start with it (at most one per account).")
    lorebook = models.CharField(
        max_length=200, blank=True, default="", help_text="The lorebook it links by name (SillyTavern's persona lore)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_default", "name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(is_default=True), name="persona_one_default_per_user"
            )
        ]

    def __str__(self) -> str:
        return self.name


class ReplyOrder(models.TextChoices):
    NATURAL = "natural", "Natural (named first, else in turn)"
    MANUAL = "manual", "Manual (you choose)"


class Chat(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats")
    characters = models.ManyToManyField(Character, related_name="chats", blank=True)
    persona = models.ForeignKey(Persona, on_delete=models.SET_NULL, null=True, blank=True, related_name="chats")
    reply_order = models.CharField(
        max_length=10,
        choices=ReplyOrder.choices,
        default=ReplyOrder.NATURAL,
        help_text="Who replies in a group chat: natural order, or the person chooses.",
    )
    title = models.CharField(max_length=300)
    # Header line of the JSONL file.
    has_header = models.BooleanField(default=True, help_text="False for headerless (old group) chat files.")
    user_name = models.TextField(blank=True, default="")
    character_name = models.TextField(blank=True, default="")
    create_date = models.JSONField(null=True, blank=True, help_text="Verbatim: ISO string, human string or epoch.")
    chat_metadata = models.JSONField(default=dict, blank=True)
    header_other_fields = models.JSONField(default=dict, blank=True)
    header_absent_fields = models.JSONField(default=list, blank=True)
    # Changes on every write to the chat or its messages (optimistic locking for clients).
    integrity = models.UUIDField(default=uuid.uuid4)
    # A default in the database too: a process of the release before, still serving while the next is rolled out,
    # creates chats without it. No CHECK (a positive field's would scan the table under its lock when added).
    writes = models.BigIntegerField(
        default=0,
        db_default=0,
        editable=False,
        help_text="How many writes the chat has had. It only grows, so a client that saw a higher number than the "
        "chat shows is looking at a copy that went back in time: a database restored from an older backup.",
    )
    uid = models.UUIDField(
        default=uuid.uuid4, unique=True, editable=False, help_text="Stable across accounts: archives match it."
    )
    message_count = models.PositiveIntegerField(default=0)
    # NULL, not "", for "no key" (DJ001): most chats have none, and the unique constraint skips them.
    client_key = models.CharField(  # noqa: DJ001
        max_length=500,
        null=True,
        blank=True,
        help_text="A client's own name for the chat, unique per account: the SillyTavern extension's is made from "
        "the chat file's name and its character's avatar or group id, so every device finds the same chat.",
    )
    mirrored_integrity = models.UUIDField(
        null=True,
        blank=True,
        editable=False,
        help_text="`integrity` right after the last write that made the chat equal to a SillyTavern file (an "
        "import, a save, a write from a client mirroring the file). While `integrity` still equals it, an export "
        "keeps the file's chat_metadata.integrity; after any other write it carries a fresh one.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["user", "-updated_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "client_key"],
                condition=models.Q(client_key__isnull=False),
                name="chat_unique_client_key_per_user",
            ),
            models.CheckConstraint(
                condition=models.Q(reply_order__in=ReplyOrder.values), name="chat_reply_order_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.title


class Message(models.Model):
    # No separate index on chat: the (chat, index) unique constraint's index serves every lookup by chat.
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages", db_index=False)
    index = models.PositiveIntegerField(help_text="0-based position in the chat.")
    name = models.TextField(blank=True, default="")
    is_user = models.BooleanField(default=False)
    is_system = models.BooleanField(default=False)
    send_date = models.JSONField(null=True, blank=True, help_text="Verbatim: ISO string, human string or epoch.")
    mes = models.TextField(blank=True, default="")
    extra = models.JSONField(default=dict, blank=True)
    swipes = models.JSONField(null=True, blank=True)
    swipe_id = models.IntegerField(null=True, blank=True)
    swipe_info = models.JSONField(null=True, blank=True)
    other_fields = models.JSONField(default=dict, blank=True)
    absent_fields = models.JSONField(default=list, blank=True)
    # The text's MD5, kept by the database with every write of `mes`. A client that sends the whole history with each
    # turn (the gateway) has it compared by these, read from the index below without touching the texts: about 2 ms
    # for a 5,000-message chat, against 6-9 ms computing them from the texts on each request.
    mes_md5 = models.GeneratedField(
        expression=MD5("mes"), output_field=models.CharField(max_length=32), db_persist=True
    )

    class Meta:
        ordering = ["chat", "index"]
        indexes = [
            models.Index(
                fields=["chat", "index"], include=["is_user", "is_system", "mes_md5"], name="message_history_digest"
            ),
        ]
        constraints = [
            # Deferred, so that removing or inserting a message can shift the following indices in one UPDATE.
            models.UniqueConstraint(
                fields=["chat", "index"], name="message_unique_index_per_chat", deferrable=models.Deferrable.DEFERRED
            ),
            models.CheckConstraint(condition=models.Q(swipe_id__gte=0), name="message_swipe_id_not_negative"),
        ]

    def __str__(self) -> str:
        return f"#{self.index} {self.name}"

    @property
    def swipe_count(self) -> int:
        return len(self.swipes) if isinstance(self.swipes, list) else 0

    @property
    def swipe_number(self) -> int:
        return (self.swipe_id or 0) + 1


class SeenGeneration(models.Model):
    """A generation id an append carried: a retry with the same id is recognised even after a restart."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="seen_generations")
    generation_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "sync_seengeneration"  # the name it had in the sync app
        constraints = [models.UniqueConstraint(fields=["chat", "generation_id"], name="seen_generation_unique")]

    def __str__(self) -> str:
        return self.generation_id


class ChatRevision(models.Model):
    """A chat as it was before a forced save, an import over it or a restore replaced it: gzipped SillyTavern JSONL,
    restorable."""

    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="revisions")
    reason = models.CharField(max_length=100)
    integrity = models.UUIDField(help_text="The replaced version's integrity.")
    message_count = models.PositiveIntegerField()
    jsonl_gzip = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "sync_chatrevision"  # the name it had in the sync app
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.chat} before {self.reason} ({self.created_at:%Y-%m-%d %H:%M})"
