from django.contrib import admin

from apps.lorebooks.models import Lorebook, LorebookEntry, LorebookRevision


class EntryInline(admin.TabularInline):
    model = LorebookEntry
    fields = ["uid", "data"]
    readonly_fields = ["uid", "data"]
    extra = 0
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Lorebook)
class LorebookAdmin(admin.ModelAdmin):
    """Moderators see and remove books; people import and change them through the site and the API, which check
    every entry (apps/lorebooks/services/fields.py)."""

    list_display = ["name", "user", "scope", "updated_at"]
    list_filter = ["scope"]
    search_fields = ["name", "user__username"]
    readonly_fields = ["user", "uid", "name", "scope", "extra", "created_at", "updated_at"]
    inlines = [EntryInline]

    def has_add_permission(self, request) -> bool:
        return False

    def get_inlines(self, request, obj):
        return [] if obj is not None and obj.entries.count() > 200 else self.inlines


@admin.register(LorebookEntry)
class LorebookEntryAdmin(admin.ModelAdmin):
    list_display = ["__str__", "uid", "lorebook"]
    search_fields = ["lorebook__name", "lorebook__user__username"]
    readonly_fields = ["lorebook", "uid", "data"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(LorebookRevision)
class LorebookRevisionAdmin(admin.ModelAdmin):
    """A book's earlier versions (apps/lorebooks/services/revisions.py): seen and removed here; people restore them
    from the book's page or the API."""

    list_display = ["lorebook", "user", "reason", "entry_count", "created_at"]
    search_fields = ["lorebook__name", "user__username"]
    readonly_fields = ["user", "lorebook", "reason", "entry_count", "data", "created_at"]
    list_select_related = ["lorebook", "user"]

    def has_add_permission(self, request) -> bool:
        return False
