from django.contrib import admin

from apps.accounts.models import SettingsDocument
from apps.sync.models import FeedEntry, Instance


@admin.register(SettingsDocument)
class SettingsDocumentAdmin(admin.ModelAdmin):
    list_display = ["user", "updated_at"]
    search_fields = ["user__username"]
    list_select_related = ["user"]
    readonly_fields = ["user", "integrity", "updated_at"]


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "user", "kind", "priority", "pulled_seq", "last_pull_at", "last_push_at"]
    list_filter = ["kind"]
    search_fields = ["key", "name", "user__username"]
    list_select_related = ["user"]
    readonly_fields = ["user", "key", "pulled_seq", "pulled_items", "pushed_items", "last_pull_at", "last_push_at"]


@admin.register(FeedEntry)
class FeedEntryAdmin(admin.ModelAdmin):
    """The sync feed, read-only: the triggers write it. A tombstone is an entry with `deleted_at`."""

    list_display = ["type", "uid", "user", "seq", "deleted_at", "deleted_by"]
    list_filter = ["type", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["=uid", "user__username"]
    list_select_related = ["user"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
