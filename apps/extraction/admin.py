"""The pipeline's records for moderators: jobs (with a retry action), per-chat progress, scenes, continuity checks,
recaps and model tests are read-only; settings are editable."""

from django.contrib import admin, messages

from apps.extraction.models import (
    ChatPipeline,
    ContinuityCheck,
    ExtractionSettings,
    ModelTest,
    PipelineJob,
    Recap,
    Scene,
)
from apps.extraction.services.jobs import PENDING, job_retry
from apps.memories.admin import ReadOnlyAdmin


@admin.register(PipelineJob)
class PipelineJobAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "user", "chat", "tier", "state", "attempts", "manual", "error"]
    list_filter = ["state", "tier", "manual"]
    search_fields = ["user__username", "chat__title", "error"]
    list_select_related = ["user", "chat"]
    date_hierarchy = "created_at"
    actions = ["retry"]

    @admin.action(description="Retry the selected jobs (failed, discarded or cancelled)")
    def retry(self, request, queryset):
        done = 0
        for job in queryset.exclude(state__in=PENDING):
            job_retry(job=job)
            done += 1
        self.message_user(request, f"{done} job(s) queued again.", messages.SUCCESS)


@admin.register(ChatPipeline)
class ChatPipelineAdmin(ReadOnlyAdmin):
    list_display = ["chat", "user", "paused", "needs_plan", "stale_from", "planned_at", "last_active_at"]
    list_filter = ["paused", "needs_plan"]
    search_fields = ["user__username", "chat__title"]
    list_select_related = ["user", "chat"]


@admin.register(Scene)
class SceneAdmin(ReadOnlyAdmin):
    list_display = ["id", "chat", "start_index", "end_index", "name", "cue", "current_version", "epistemic_done"]
    search_fields = ["chat__title", "name", "cue"]
    list_select_related = ["chat"]


@admin.register(ContinuityCheck)
class ContinuityCheckAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "chat", "message_index", "status", "repair_consumed_at"]
    list_filter = ["status"]
    list_select_related = ["chat"]


@admin.register(Recap)
class RecapAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "chat", "state", "away_since", "dismissed_at"]
    list_filter = ["state"]
    list_select_related = ["chat"]


@admin.register(ModelTest)
class ModelTestAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "user", "connection_name", "model", "profile", "state"]
    list_filter = ["state", "profile"]
    list_select_related = ["user"]


@admin.register(ExtractionSettings)
class ExtractionSettingsAdmin(admin.ModelAdmin):
    list_display = ["user", "enabled", "batch_every", "context_tokens", "canon_auto", "continuity_auto", "updated_at"]
    list_filter = ["enabled", "canon_auto", "continuity_auto"]
    search_fields = ["user__username"]
