from django.contrib import admin

from apps.sync.models import ChatRevision, SettingsDocument


@admin.register(ChatRevision)
class ChatRevisionAdmin(admin.ModelAdmin):
    list_display = ["chat", "reason", "message_count", "created_at"]
    list_filter = ["reason", "created_at"]
    search_fields = ["chat__title", "chat__user__username"]
    list_select_related = ["chat"]
    exclude = ["jsonl_gzip"]
    readonly_fields = ["chat", "reason", "integrity", "message_count", "created_at"]

    def has_add_permission(self, request):
        return False


@admin.register(SettingsDocument)
class SettingsDocumentAdmin(admin.ModelAdmin):
    list_display = ["user", "updated_at"]
    search_fields = ["user__username"]
    list_select_related = ["user"]
    readonly_fields = ["user", "integrity", "updated_at"]
