"""The context builder's per-chat records (content cache, trim statistics, demand), read-only for moderators."""

from django.contrib import admin

from apps.injection.models import InjectionState
from apps.memories.admin import ReadOnlyAdmin


@admin.register(InjectionState)
class InjectionStateAdmin(ReadOnlyAdmin):
    list_display = ["chat", "user", "turn_type", "builds", "built_at"]
    list_filter = ["turn_type"]
    search_fields = ["chat__title", "user__username"]
    list_select_related = ["chat", "user"]
