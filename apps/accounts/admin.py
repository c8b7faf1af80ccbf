from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.db.models import Q

from apps.accounts.audit import audit_record
from apps.accounts.models import ApiToken, AuditEvent
from apps.accounts.services import user_deactivate
from apps.accounts.signin import admin_sign_in

User = get_user_model()


@admin.action(description="Deactivate selected users (no sign-in, API tokens stop working)", permissions=["change"])
def deactivate_users(modeladmin, request, queryset):
    if queryset.filter(pk=request.user.pk).exists():
        modeladmin.message_user(request, "You cannot deactivate your own account.", messages.ERROR)
        queryset = queryset.exclude(pk=request.user.pk)
    if not request.user.is_superuser and queryset.filter(Q(is_superuser=True) | Q(is_staff=True)).exists():
        modeladmin.message_user(request, "Only a superuser can deactivate a staff account.", messages.ERROR)
        queryset = queryset.exclude(Q(is_superuser=True) | Q(is_staff=True))
    count = 0
    for user in queryset.filter(is_active=True):
        user_deactivate(user=user, actor=request.user)
        modeladmin.log_change(request, user, "Deactivated through the admin action.")
        count += 1
    modeladmin.message_user(request, f"Deactivated {count} user(s).", messages.SUCCESS)


admin.site.unregister(User)


def _may_manage(actor, account) -> bool:
    """A superuser manages every account; a moderator only people's accounts and his own (another staff account
    may hold powers he lacks, and setting its password would hand them to him)."""
    if account is None or actor.is_superuser or account.pk == actor.pk:
        return True
    return not (account.is_superuser or account.is_staff)


# What makes an account powerful: only a superuser grants it, and only a superuser changes a superuser. A moderator
# with "change user" (which the deactivate action needs) could otherwise make himself a superuser, or set the
# password of one.
PRIVILEGE_FIELDS = ("is_staff", "is_superuser", "groups", "user_permissions")


@admin.register(User)
class LorekeeperUserAdmin(UserAdmin):
    actions = [deactivate_users]

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if request.user.is_superuser else fields + PRIVILEGE_FIELDS

    def has_change_permission(self, request, obj=None):
        if not _may_manage(request.user, obj):
            return False  # the password form asks this too
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if not _may_manage(request.user, obj):
            return False
        return super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and "is_active" in form.changed_data and not obj.is_active:  # "Active" unticked by hand
            audit_record(
                action=AuditEvent.Action.USER_DEACTIVATED, user=obj, actor=request.user, target=obj.get_username()
            )


admin.site.unregister(Group)


@admin.register(Group)
class LorekeeperGroupAdmin(GroupAdmin):
    """A group is a bundle of permissions: changing one grants them to its members, so only superusers may."""

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser


# The admin's sign-in pauses after repeated failures like the site's (apps/accounts/signin.py).
admin.site.login = admin_sign_in


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter), "created_at"]
    search_fields = ["name", "prefix", "user__username"]
    list_select_related = ["user"]
    # The digest is useless to a moderator and the token itself is never stored: nothing secret is shown.
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "prefix", "created_at", "last_used_at"]

    def has_add_permission(self, request):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """Token creation and revocation, sign-ins paused after failures, accounts switched off."""

    list_display = ["created_at", "action", "user", "actor", "target", "ip"]
    list_filter = ["action", "created_at"]
    search_fields = ["user__username", "actor__username", "target", "ip"]
    list_select_related = ["user", "actor"]


@admin.register(LogEntry)
class ModerationLogAdmin(ReadOnlyAdmin):
    """What staff changed through the admin (Django's admin log), for staff to review."""

    list_display = ["action_time", "user", "content_type", "object_repr", "action_flag", "change_message"]
    list_filter = ["action_flag", "content_type", "action_time"]
    search_fields = ["object_repr", "user__username", "change_message"]
    list_select_related = ["user", "content_type"]
