"""Operations the migrations share.

`content_types_move`: when a model moves to another app with its table (a state-only move), its content type, and
with it the permissions people and groups were given and the admin's history of its objects, moves too. Without
it the old content type stays behind, the new app gets fresh permissions nobody holds, and the admin's history no
longer links to the objects."""

from __future__ import annotations

from django.conf import settings
from django.db import migrations

DEPENDENCIES = [
    ("contenttypes", "0002_remove_content_type_name"),
    ("auth", "0012_alter_user_first_name_max_length"),
    ("admin", "0003_logentry_add_action_flag_choices"),
    migrations.swappable_dependency(settings.AUTH_USER_MODEL),
]


def _move(apps, source: str, target: str, models: tuple[str, ...]) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    permission = apps.get_model("auth", "Permission")
    log_entry = apps.get_model("admin", "LogEntry")
    group_grants = apps.get_model("auth", "Group").permissions.through
    user_grants = apps.get_model(settings.AUTH_USER_MODEL).user_permissions.through
    for model in models:
        old = content_type.objects.filter(app_label=source, model=model).first()
        if old is None:
            continue
        new = content_type.objects.filter(app_label=target, model=model).first()
        if new is None:  # the usual case: the new app's content type was never made
            old.app_label = target
            old.save(update_fields=["app_label"])
            continue
        # Both exist (the new one made when migrations last ran): grants move to the new one's permissions.
        for grant in permission.objects.filter(content_type=old):
            twin = permission.objects.filter(content_type=new, codename=grant.codename).first()
            if twin is None:
                grant.content_type = new
                grant.save(update_fields=["content_type"])
                continue
            for through, owner in ((group_grants, "group_id"), (user_grants, "user_id")):
                held = set(through.objects.filter(permission=twin).values_list(owner, flat=True))
                for row in through.objects.filter(permission=grant):
                    if getattr(row, owner) not in held:
                        through.objects.create(**{owner: getattr(row, owner), "permission": twin})
        log_entry.objects.filter(content_type=old).update(content_type=new)
        old.delete()


def content_types_move(source: str, target: str, *models: str) -> migrations.RunPython:
    """The content types of `models` (lower-case model names) move from app `source` to app `target`; reversed,
    they move back."""

    def forward(apps, schema_editor):
        _move(apps, source, target, models)

    def backward(apps, schema_editor):
        _move(apps, target, source, models)

    return migrations.RunPython(forward, backward, elidable=False)
