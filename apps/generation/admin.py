from django.contrib import admin

from apps.generation.models import Generation


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    """Replies generated here, read-only: what was asked, the prompt, how it ended."""

    list_display = ["created_at", "user", "chat", "mode", "state", "model", "prompt_tokens", "finished_at"]
    list_filter = ["mode", "state", "api"]
    search_fields = ["user__username", "=uid", "model"]
    list_select_related = ["user", "chat"]
    readonly_fields = [field.name for field in Generation._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
