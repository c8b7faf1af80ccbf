"""The memory store: what extraction writes, what search and injection read.

A memory belongs to a user and either to a character (persistent across that character's chats) or to one chat (`chat`
set: isolated to that conversation, as ST-BME keeps one graph per chat; docs/GLOSSARY.md, scope). Chat messages
themselves are memories of kind `message`, one per message, so recall works before any LLM has extracted anything.

Vectors of any dimension share the `embedding` column; `embedding_model` and `embedding_dim` say which space each
lies in, and one HNSW index per common dimension (partial, on a cast of the column) serves KNN within a space. The
column `search_vector` (a generated tsvector, GIN-indexed) is made by migration 0001 and read by raw SQL only.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from pgvector.django import VectorField

from apps.common.models import BackgroundJob, Synced

# Dimensions with an HNSW index (all-MiniLM 384, nomic-embed-text 768, mxbai/bge-large 1024, OpenAI small 1536).
# Other dimensions are searched exactly, which is fine for a user's few thousand vectors, slow past that.
INDEXED_DIMENSIONS = (384, 768, 1024, 1536)
# How every HNSW index of memories is built (migration 0011 rebuilt those made with pgvector's defaults, 16 and 64).
# Writing a vector links it to up to 2m neighbours and prunes each of their lists, which reads their vectors: 16
# links cost 139-146 ms a batch of 256 LoCoMo turns, 12 links 86-87 ms: the largest share of PostgreSQL's time in an
# import. Recall@10 through a user's own index at 100,000 memories was 0.976 with 16 and 0.982 with 12; with 8 it
# fell to 0.940, under the 0.95 search is held to (bench/memory_search.py; docs/SEARCH.md).
HNSW_OPTIONS = "m = 12, ef_construction = 48"
SEARCH_CONFIG = "english"


class Kind(models.TextChoices):
    FACT = "fact"
    RELATIONSHIP = "relationship"
    PREFERENCE = "preference"
    EVENT = "event"
    SCENE = "scene"
    REVELATION = "revelation"
    DEVELOPMENT = "development"
    DETAIL = "detail"
    ARC = "arc"
    STATE = "state"
    EPISTEMIC = "epistemic"
    SUMMARY = "summary"
    SCENE_RECAP = "scene_recap"
    PROFILE = "profile"
    CANON = "canon"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"
    YEARLY = "yearly"
    SIGNIFICANT = "significant"
    MESSAGE = "message"


class Status(models.TextChoices):
    ACTIVE = "active"
    RETIRED = "retired"


class Retired:
    """Why the lifecycle retires a memory (`Memory.retired_reason`). Any other reason ("deleted", one typed on the
    memory's page, "moderator") is a person's, and extraction does not write that memory again."""

    SUPERSEDED = "superseded"
    CONSOLIDATED = "consolidated"
    DECAYED = "decayed"
    ROLLED_BACK = "rolled_back"
    BY_LIFECYCLE = (SUPERSEDED, CONSOLIDATED, DECAYED, ROLLED_BACK)


class Entity(models.Model):
    """A named thing of a user's stories (a person, place, object, faction…), per character or user-wide."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="entities")
    character = models.ForeignKey(
        "chats.Character", null=True, blank=True, on_delete=models.CASCADE, related_name="entities"
    )
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=50, blank=True, default="")
    aliases = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "entities"
        ordering = ["name", "id"]
        constraints = [
            # One entity per name in a registry (a character's, or the user-wide one: NULL is a registry too),
            # names compared trimmed and in any case; apps/memories/services/entities.py resolves names the same way.
            models.UniqueConstraint(
                "user",
                "character",
                models.functions.Lower(models.functions.Trim("name")),
                name="entity_unique_name_per_registry",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return self.name


class Memory(Synced):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memories")
    character = models.ForeignKey(
        "chats.Character", null=True, blank=True, on_delete=models.CASCADE, related_name="memories"
    )
    chat = models.ForeignKey(
        "chats.Chat",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="memories",
        help_text="Set for chat-scoped memories (summaries, scenes, session details, messages).",
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    content = models.TextField()
    content_hash = models.CharField(max_length=64, help_text="sha256 of content, hex.")
    data = models.JSONField(default=dict, blank=True, help_text="Structured fields of the kind (state, descriptors).")

    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    embedding_dim = models.PositiveSmallIntegerField(null=True, blank=True)

    importance = models.PositiveSmallIntegerField(default=2, help_text="1 (minor) to 3 (major).")
    confidence = models.FloatField(default=0.7)
    unconfirmed_count = models.PositiveIntegerField(default=0)
    time_scope = models.CharField(max_length=20, blank=True, default="", help_text="scene, session or permanent.")
    valid_from = models.PositiveIntegerField(null=True, blank=True, help_text="Message index it holds from.")
    valid_to = models.PositiveIntegerField(null=True, blank=True, help_text="Message index it stopped holding at.")
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    contradicts = models.ManyToManyField("self", blank=True, symmetrical=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    retired_reason = models.CharField(max_length=50, blank=True, default="")

    source_chat = models.ForeignKey(
        "chats.Chat", null=True, blank=True, on_delete=models.SET_NULL, related_name="sourced_memories"
    )
    source_message_indices = ArrayField(models.PositiveIntegerField(), default=list, blank=True)
    message_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="For kind=message: the message it indexes (kept in step with edits)."
    )
    occurred_at = models.DateTimeField(null=True, blank=True, help_text="When it happened in the story, if known.")
    entities = models.ManyToManyField(Entity, blank=True, related_name="memories")
    edited_by = models.CharField(
        max_length=64, blank=True, default="", help_text="Who last corrected it by hand: an instance, or 'web'."
    )
    origin = models.CharField(
        max_length=20,
        blank=True,
        default="",
        help_text="What wrote it: api, extraction, consolidation or hierarchy (empty: written before this was kept). "
        "Rebuilding a chat's extraction retires only what extraction wrote.",
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    version = models.PositiveIntegerField(default=1)

    class Meta:
        verbose_name_plural = "memories"
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "character", "status", "kind"], name="memory_user_character"),
            models.Index(fields=["chat", "status", "kind"], name="memory_chat"),
            models.Index(fields=["user", "embedding_model"], name="memory_user_model"),
            models.Index(fields=["user", "content_hash"], name="memory_user_hash"),
            # The hierarchy finds the days a user's characters spoke on (message memories by creation time).
            models.Index(fields=["user", "kind", "created_at"], name="memory_user_kind_created"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(character__isnull=False) | models.Q(chat__isnull=False),
                name="memory_has_scope",
            ),
            models.CheckConstraint(condition=models.Q(importance__gte=1, importance__lte=3), name="memory_importance"),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1), name="memory_confidence_range"
            ),
            models.CheckConstraint(condition=models.Q(kind__in=Kind.values), name="memory_kind_valid"),
            models.CheckConstraint(condition=models.Q(status__in=Status.values), name="memory_status_valid"),
            models.CheckConstraint(
                condition=models.Q(kind=Kind.MESSAGE, chat__isnull=False, message_index__isnull=False)
                | (~models.Q(kind=Kind.MESSAGE) & models.Q(message_index__isnull=True)),
                name="memory_message_index_iff_message",
            ),
            models.UniqueConstraint(
                # message_index is NULL on every other kind, and NULLs never collide.
                fields=["chat", "message_index"],
                name="memory_one_per_message",
                deferrable=models.Deferrable.DEFERRED,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.content[:60]}"

    @property
    def is_message(self) -> bool:
        return self.kind == Kind.MESSAGE

    def data_field(self, key: str, kind: type, default=None):
        """`data[key]` when it is a `kind` (a bool is no int here), else `default`. People and their clients write
        `data` (REST, sync), so a field the platform wrote as a number may come back as text, a list or a map."""
        value = self.data.get(key) if isinstance(self.data, dict) else None
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
        return default


class EmbeddingCache(models.Model):
    """One vector per (model, text): identical text is never embedded twice, whoever wrote it."""

    model = models.CharField(max_length=200)
    content_hash = models.CharField(max_length=64)
    dim = models.PositiveSmallIntegerField()
    vector = VectorField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "content_hash"], name="embedding_cache_key")]

    def __str__(self) -> str:
        return f"{self.model} {self.content_hash[:12]}"


class EmbeddingSettings(models.Model):
    """A user's own embedding provider, overriding the deployment's (LOREKEEPER_EMBEDDINGS_*)."""

    class Provider(models.TextChoices):
        LOCAL = "local", "Local (sentence-transformers)"
        OPENAI = "openai", "OpenAI-compatible /v1/embeddings"
        OLLAMA = "ollama", "Ollama /api/embed"
        NONE = "none", "None (text search only)"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="embedding_settings")
    provider = models.CharField(max_length=10, choices=Provider.choices)
    model = models.CharField(max_length=200, blank=True, default="")
    base_url = models.URLField(max_length=500, blank=True, default="")
    api_key_encrypted = models.TextField(blank=True, default="")
    dimensions = models.PositiveIntegerField(null=True, blank=True, help_text="Ask the provider for this size.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "embedding settings"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(provider__in=["local", "openai", "ollama", "none"]),
                name="embedding_settings_provider_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.provider} {self.model}"


class MemoryScope(models.Model):
    """The memory schema version of one character or one chat: versioned, never destructive
    (apps/memories/services/schema.py)."""

    character = models.OneToOneField(
        "chats.Character", null=True, blank=True, on_delete=models.CASCADE, related_name="memory_scope"
    )
    chat = models.OneToOneField(
        "chats.Chat", null=True, blank=True, on_delete=models.CASCADE, related_name="memory_scope"
    )
    schema_version = models.PositiveIntegerField(default=0)
    indexed_integrity = models.UUIDField(
        null=True, blank=True, help_text="The chat's integrity when its messages were last indexed (chats only)."
    )
    changed_from = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Chats only: the lowest message index whose text changed (edited, swiped, deleted, moved) since "
        "extraction last looked; appends do not count. Set by indexing, taken by the extraction planner.",
    )
    migrated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(character__isnull=False, chat__isnull=True)
                | models.Q(character__isnull=True, chat__isnull=False),
                name="memory_scope_one_owner",
            )
        ]

    def __str__(self) -> str:
        return f"memory scope of {self.chat or self.character} (v{self.schema_version})"


class Decision(models.Model):
    """Why a memory is here, or why it left: one record per lifecycle decision, with the scores it was made on.

    `memory` is the memory the decision made or changed (None for a rejected candidate, which is never stored: its
    text is kept in `content`); `related` is the existing memory it was compared with (the duplicate re-confirmed,
    the one superseded or contradicted, one of those merged by consolidation)."""

    class Outcome(models.TextChoices):
        PASSED = "passed", "passed (new)"
        SUPERSEDED = "superseded", "superseded an older memory"
        UNCERTAIN = "uncertain", "kept beside a similar one (the model judged them independent)"
        CONTRADICTION = "contradiction", "kept, contradicting another"
        REJECTED = "rejected", "rejected as a duplicate (the existing one re-confirmed)"
        CONSOLIDATED = "consolidated", "merged by consolidation"
        DECAYED = "decayed", "retired: confidence decayed to the floor"
        SUMMARISED = "summarised", "summary of a period"
        ROLLED_BACK = "rolled_back", "retired: the messages it came from changed and were extracted again"
        RESTORED = "restored", "active again: what replaced it was rolled back"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_decisions")
    memory = models.ForeignKey(Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="decisions")
    related = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="related_decisions"
    )
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    content = models.TextField(blank=True, default="", help_text="The candidate's text.")
    method = models.CharField(max_length=20, blank=True, default="", help_text="embedding, jaccard, hash, model…")
    similarity = models.FloatField(null=True, blank=True)
    scores = models.JSONField(default=dict, blank=True, help_text="Similarities, thresholds, profile, cue, answer.")
    reason = models.TextField(blank=True, default="")
    llm_call = models.ForeignKey("llm.Call", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="decision_user_recent")]

    def __str__(self) -> str:
        return f"{self.outcome}: {self.content[:60]}"


class ConsolidationCounter(models.Model):
    """New entries of one kind in one scope since that kind was last consolidated (independent per kind)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    character = models.ForeignKey("chats.Character", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey("chats.Chat", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    count = models.PositiveIntegerField(default=0)
    last_consolidated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "character", "chat", "kind"], name="consolidation_counter_key", nulls_distinct=False
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.count}"


class LifecycleSettings(models.Model):
    """A user's settings for the periodic memory work: the time zone the daily→yearly schedule runs in."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="lifecycle_settings")
    time_zone = models.CharField(max_length=64, default="UTC")
    hierarchy_enabled = models.BooleanField(default=True, help_text="Build daily→weekly→monthly→yearly summaries.")

    class Meta:
        verbose_name_plural = "lifecycle settings"

    def __str__(self) -> str:
        return f"{self.user}: {self.time_zone}"


class LifecycleJob(BackgroundJob):
    """One run of background lifecycle work (a consolidation pass, a hierarchy run), with its progress and error."""

    class Type(models.TextChoices):
        CONSOLIDATION = "consolidation"
        HIERARCHY = "hierarchy"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="lifecycle_jobs")
    type = models.CharField(max_length=20, choices=Type.choices)
    character = models.ForeignKey("chats.Character", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    chat = models.ForeignKey("chats.Chat", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)

    class Meta(BackgroundJob.Meta):
        indexes = [models.Index(fields=["user", "-created_at"], name="lifecycle_job_user_recent")]

    def __str__(self) -> str:
        return f"{self.type} {self.state}"
