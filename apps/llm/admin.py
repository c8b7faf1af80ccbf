from django.contrib import admin

from apps.llm.models import Budget, Call, Connection, SamplerPreset
from apps.llm.selectors import background_usage


@admin.register(Connection)
class ConnectionAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "api", "model", "base_url", "profile", "is_default", "last_test_ok"]
    list_filter = ["api", "profile", "is_default", "last_test_ok"]
    search_fields = ["name", "model", "base_url", "user__username"]
    # The key never reaches a page, not even a moderator's: only its last characters. Where the key is sent (the
    # URL and the API) and whose it is are the user's alone: a moderator who could change them would receive the
    # key with the next call. Users make connections through the site and the API, which check the URL.
    exclude = ["api_key_encrypted"]
    readonly_fields = [
        "user",
        "api",
        "base_url",
        "api_key_hint",
        "last_tested_at",
        "last_test_ok",
        "last_test_message",
        "created_at",
    ]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Call)
class CallAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "purpose", "template", "model", "status", "attempts", "latency_ms"]
    list_filter = ["status", "purpose"]
    search_fields = ["user__username", "error", "template"]
    readonly_fields = [f.name for f in Call._meta.fields]
    date_hierarchy = "created_at"

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(SamplerPreset)
class SamplerPresetAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "created_at"]
    search_fields = ["name", "user__username"]
    list_select_related = ["user"]
    # Read-only: values are checked by sampler_clean, which the admin's JSON field would bypass.
    readonly_fields = ["user", "values", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Each user's daily limit for background work, and above the list what every user's background work spent
    today and over 30 days (who spends, before a bill says so)."""

    list_display = ["user", "daily_tokens"]
    search_fields = ["user__username"]
    list_select_related = ["user"]
    readonly_fields = ["user"]
    change_list_template = "admin/llm/budget/change_list.html"

    def has_add_permission(self, request) -> bool:
        return False

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "usage": background_usage(days=30)[:50]})
