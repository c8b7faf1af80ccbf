"""Moderators' view of the memory store. Edits go through the services (version bump, re-embedding); vectors and
hashes are read-only here."""

from django.conf import settings
from django.contrib import admin, messages

from apps.common.owned import SameOwnerForm
from apps.memories.models import (
    ConsolidationCounter,
    Decision,
    EmbeddingSettings,
    Entity,
    LifecycleJob,
    LifecycleSettings,
    Memory,
    MemoryScope,
)
from apps.memories.services.memories import memory_retire, memory_update
from apps.memories.services.own_indexes import own_indexes_list

EDITABLE = ["kind", "content", "importance", "confidence", "time_scope", "valid_from", "valid_to", "data"]


@admin.action(description="Retire selected memories", permissions=["change"])
def retire_memories(modeladmin, request, queryset):
    count = 0
    for memory in queryset.exclude(kind="message").filter(status="active"):
        memory_retire(memory=memory, reason="moderator")
        count += 1
    modeladmin.message_user(request, f"Retired {count} memory(ies).", messages.SUCCESS)


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    form = SameOwnerForm  # what it links (entities, contradictions) is its user's
    list_display = [
        "id",
        "kind",
        "short_content",
        "user",
        "character",
        "chat",
        "status",
        "embedding_model",
        "updated_at",
    ]
    list_filter = ["kind", "status", "origin", "embedding_model"]
    search_fields = ["content", "user__username"]
    list_select_related = ["user", "character", "chat"]
    raw_id_fields = ["user", "character", "chat", "source_chat", "superseded_by", "contradicts", "entities"]
    readonly_fields = [
        "user",
        "character",
        "chat",
        "content_hash",
        "embedding_model",
        "embedding_dim",
        "message_index",
        "source_chat",
        "source_message_indices",
        "superseded_by",
        "status",
        "retired_reason",
        "source_instance",
        "participating_instances",
        "origin",
        "created_at",
        "updated_at",
        "version",
    ]
    fields = [*readonly_fields[:3], *EDITABLE, *readonly_fields[3:]]
    actions = [retire_memories]
    change_list_template = "admin/memories/memory/change_list.html"

    def changelist_view(self, request, extra_context=None):
        # Above the list: which users' searches walk an HNSW index of their own, and its state.
        own = {"own_indexes": own_indexes_list(), "own_index_min": settings.LOREKEEPER_SEARCH["own_index_min"]}
        return super().changelist_view(request, {**(extra_context or {}), **own})

    @admin.display(description="content")
    def short_content(self, memory: Memory) -> str:
        return memory.content[:80]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    def has_add_permission(self, request) -> bool:
        return False  # memories come from chats, extraction and the API, which check their scope

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.is_message:
            return self.fields  # a message memory follows its message
        return self.readonly_fields

    def save_model(self, request, obj, form, change):
        memory_update(
            memory=obj,
            data={key: form.cleaned_data[key] for key in form.changed_data if key in EDITABLE},
            edited_by="admin",
        )


@admin.register(Entity)
class EntityAdmin(admin.ModelAdmin):
    form = SameOwnerForm  # its character is its user's
    list_display = ["name", "type", "user", "character", "updated_at"]
    search_fields = ["name", "user__username"]
    list_filter = ["type"]
    raw_id_fields = ["user", "character"]


@admin.register(EmbeddingSettings)
class EmbeddingSettingsAdmin(admin.ModelAdmin):
    list_display = ["user", "provider", "model", "base_url", "updated_at"]
    list_filter = ["provider"]
    # As with LLM connections (apps/llm/admin.py): where a user's key goes is never a moderator's to change.
    exclude = ["api_key_encrypted"]
    readonly_fields = ["user", "provider", "base_url"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(MemoryScope)
class MemoryScopeAdmin(admin.ModelAdmin):
    list_display = ["id", "character", "chat", "schema_version", "migrated_at"]
    readonly_fields = ["character", "chat", "schema_version", "indexed_integrity", "changed_from", "migrated_at"]

    def has_add_permission(self, request) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records of what the lifecycle did: moderators read them; they change only through the lifecycle."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "user", "outcome", "kind", "method", "similarity", "memory", "related"]
    list_filter = ["outcome", "kind", "method"]
    search_fields = ["content", "reason", "user__username"]
    list_select_related = ["user"]
    raw_id_fields = ["memory", "related", "llm_call"]


@admin.register(LifecycleJob)
class LifecycleJobAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "user", "type", "character", "chat", "state", "error"]
    list_filter = ["type", "state"]
    search_fields = ["user__username", "error"]
    list_select_related = ["user", "character", "chat"]


@admin.register(LifecycleSettings)
class LifecycleSettingsAdmin(admin.ModelAdmin):
    list_display = ["user", "time_zone", "hierarchy_enabled"]
    list_filter = ["hierarchy_enabled"]
    raw_id_fields = ["user"]


@admin.register(ConsolidationCounter)
class ConsolidationCounterAdmin(ReadOnlyAdmin):
    list_display = ["user", "character", "chat", "kind", "count", "last_consolidated_at"]
    list_filter = ["kind"]
