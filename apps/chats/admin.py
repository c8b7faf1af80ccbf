from django.contrib import admin, messages
from django.db import models

from apps.chats.models import Character, Chat, ChatRevision, Message, Persona
from apps.chats.services.chats import chat_delete, chat_lock, chat_touch
from apps.chats.services.messages import message_delete
from apps.common.owned import SameOwnerForm


@admin.register(Character)
class CharacterAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "created_at", "updated_at"]
    search_fields = ["name", "user__username", "description"]
    list_filter = ["created_at"]
    list_select_related = ["user"]
    raw_id_fields = ["user"]


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "is_default", "created_at"]
    search_fields = ["name", "user__username"]
    list_filter = ["is_default"]
    list_select_related = ["user"]
    raw_id_fields = ["user"]


@admin.action(description="Delete selected chats with all their messages", permissions=["delete"])
def delete_chats(modeladmin, request, queryset):
    chats = list(queryset)
    modeladmin.log_deletions(request, chats)  # before deleting: the log keeps each chat's repr
    for chat in chats:
        chat_delete(chat=chat)
    modeladmin.message_user(request, f"Deleted {len(chats)} chat(s).", messages.SUCCESS)


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["index", "name", "is_user", "is_system", "mes"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True
    extra = 0
    max_num = 0
    ordering = ["index"]

    def get_queryset(self, request):
        # A chat can have 100,000 messages; the inline shows the first ones, the Message admin has the rest.
        return super().get_queryset(request).filter(index__lt=50)


@admin.register(Chat)
class ChatAdmin(admin.ModelAdmin):
    form = SameOwnerForm  # its characters and persona are its user's
    list_display = ["title", "user", "message_count", "has_header", "updated_at"]
    search_fields = ["title", "character_name", "user__username"]
    list_filter = ["has_header", "updated_at", "created_at"]
    list_select_related = ["user"]
    raw_id_fields = ["user", "persona"]
    filter_horizontal = ["characters"]
    readonly_fields = ["integrity", "writes", "message_count", "created_at", "updated_at"]
    actions = [delete_chats]
    inlines = [MessageInline]

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # ours logs each chat and goes through the service
        return actions

    def save_model(self, request, obj, form, change):
        # The count of writes as the database has it, not as the form's page loaded it: another write meanwhile
        # must not be counted back (clients read a lower count as a restored backup).
        if change:
            obj.writes = models.F("writes")
        super().save_model(request, obj, form, change)
        if change:
            chat_touch(chat=obj)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["chat", "index", "name", "is_user", "is_system"]
    list_filter = ["is_user", "is_system"]
    # "@mes": the words of the message text, by PostgreSQL full-text search (stemmed: "lanterns" finds "lantern").
    search_fields = ["@mes", "name", "chat__title", "chat__user__username"]
    list_select_related = ["chat"]
    raw_id_fields = ["chat"]
    show_full_result_count = False
    ordering = ["chat", "index"]
    readonly_fields = ["chat", "index"]

    def has_add_permission(self, request):
        return False  # messages are added through the chat's API, which keeps indices contiguous

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        chat_touch(chat=chat_lock(chat=obj.chat))

    def delete_model(self, request, obj):
        message_delete(chat=obj.chat, index=obj.index)

    def delete_queryset(self, request, queryset):
        # Highest index first, so the indices still to delete do not move.
        for message in queryset.select_related("chat").order_by("chat_id", "-index"):
            message_delete(chat=message.chat, index=message.index)


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
