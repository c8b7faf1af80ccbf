from django.contrib import admin

from apps.archives.models import Backup, BackupSettings


@admin.register(Backup)
class BackupAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "kind", "trigger", "state", "progress", "size", "created_at", "finished_at"]
    list_filter = ["kind", "state", "trigger"]
    search_fields = ["user__username"]
    list_select_related = ["user"]
    readonly_fields = [
        "user", "kind", "trigger", "state", "stage", "progress", "file", "size", "source", "counts", "error",
        "created_at", "started_at", "finished_at",
    ]  # fmt: skip

    def has_add_permission(self, request):
        return False


@admin.register(BackupSettings)
class BackupSettingsAdmin(admin.ModelAdmin):
    list_display = ["user", "mode", "every_hours", "keep"]
    list_filter = ["mode"]
    search_fields = ["user__username"]
