from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction
from django.utils import timezone

from apps.accounts.audit import audit_record
from apps.accounts.models import ApiToken, AuditEvent, SettingsDocument
from apps.common import jsonpatch
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason

TOKEN_PREFIX = "lk_"
MAX_ACTIVE_TOKENS = 50  # a person's unrevoked tokens: one a device or script, with room to spare
# Recording every use would turn each API read into a write; a minute's precision is plenty.
LAST_USED_PRECISION = timedelta(minutes=1)


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def api_token_create(*, user: AbstractUser, name: str, ip: str | None = None) -> tuple[ApiToken, str]:
    """Make a token for `user`; answers the stored row and the raw token, which is never retrievable again."""
    name = name.strip()
    if not name:
        raise ApplicationError("A token needs a name.", {"field": "name"})
    get_user_model().objects.select_for_update().filter(pk=user.pk).exists()  # one creation at a time a person
    if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_ACTIVE_TOKENS:
        raise ApplicationError(
            f"You have {MAX_ACTIVE_TOKENS} tokens in use, the most there can be: revoke one you no longer use first.",
            {"field": "name"},
        )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name[:100], prefix=raw[:10], digest=token_digest(raw))
    audit_record(action=AuditEvent.Action.TOKEN_CREATED, user=user, target=f"{token.name} ({token.prefix}…)", ip=ip)
    return token, raw


@transaction.atomic
def api_token_revoke(*, user: AbstractUser, token_id: int, ip: str | None = None) -> ApiToken:
    token = ApiToken.objects.select_for_update().get(user=user, pk=token_id)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        target = f"{token.name} ({token.prefix}…)"
        audit_record(action=AuditEvent.Action.TOKEN_REVOKED, user=user, target=target, ip=ip)
    return token


def api_token_authenticate(*, raw: str) -> AbstractUser | None:
    """The active user the token belongs to, or None for an unknown, revoked or deactivated one."""
    if not raw.startswith(TOKEN_PREFIX):
        return None
    found = _token_owner(token_digest(raw))
    if found is None:
        return None
    token_id, last_used_at, user = found
    now = timezone.now()
    if last_used_at is None or now - last_used_at > LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=now)
    return user


def _token_owner(digest: str) -> tuple[int, Any, AbstractUser] | None:
    """The unrevoked token of `digest` (its id, when it was last used) and its owner, if active. Every API request
    asks it first: the query is written out, as the ORM took about twice the query's own time to compose it. The
    owner's fields are taken as the database answers them, as the user model's need no conversion."""
    user_model = get_user_model()
    fields = user_model._meta.concrete_fields
    columns = ", ".join(f'u."{field.column}"' for field in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.id, t.last_used_at, {columns} FROM {ApiToken._meta.db_table} t "
            f'JOIN {user_model._meta.db_table} u ON u."{user_model._meta.pk.column}" = t.user_id '
            f'WHERE t.digest = %s AND t.revoked_at IS NULL AND u."{user_model._meta.get_field("is_active").column}"',
            [digest],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return row[0], row[1], user_model.from_db(connection.alias, [field.attname for field in fields], row[2:])


@transaction.atomic
def user_signup(*, username: str, email: str, password: str) -> AbstractUser:
    """An account made on the sign-up page, whose form has checked the name is free and the password acceptable."""
    user = get_user_model()(username=username, email=email)
    user.set_password(password)
    user.save()
    return user


@transaction.atomic
def user_deactivate(*, user: AbstractUser, actor: AbstractUser | None = None) -> AbstractUser:
    """Switch an account off: no sign-in, and its API tokens stop working (they are checked against is_active)."""
    user.is_active = False
    user.save(update_fields=["is_active"])
    audit_record(action=AuditEvent.Action.USER_DEACTIVATED, user=user, actor=actor, target=user.get_username())
    return user


@transaction.atomic
def admin_ensure(*, username: str, password: str | None) -> tuple[AbstractUser | None, str | None]:
    """Create the first admin if no superuser exists. Answers (user, generated password or None)."""
    user_model = get_user_model()
    if user_model.objects.filter(is_superuser=True).exists():
        return None, None
    generated = None
    if not password:
        password = generated = secrets.token_urlsafe(12)
    user = user_model.objects.create_superuser(username=username, email="", password=password)
    return user, generated


# --- the settings document: each user's settings, namespaced per extension, patched like chat metadata ---------


class SettingsConflict(ApplicationError):
    def __init__(self, document: SettingsDocument) -> None:
        super().__init__(
            "The settings were changed by another client since you read them; read them again and re-apply.",
            {"current_integrity": str(document.integrity)},
            status=409,
            code="integrity",
        )


def settings_document_get(*, user: AbstractUser) -> SettingsDocument:
    """The user's document, made empty on first use (ON CONFLICT DO NOTHING: two first reads cannot collide)."""
    document = SettingsDocument.objects.filter(user=user).first()
    if document is None:
        SettingsDocument.objects.bulk_create([SettingsDocument(user=user)], ignore_conflicts=True)
        document = SettingsDocument.objects.get(user=user)
    return document


@transaction.atomic
def settings_document_patch(*, user: AbstractUser, patch: Any, kind: str, integrity: uuid.UUID) -> SettingsDocument:
    """`kind` "merge" (RFC 7386) or "json" (RFC 6902). Top-level keys are extension namespaces, each an object."""
    settings_document_get(user=user)
    document = SettingsDocument.objects.select_for_update().get(user=user)
    if document.integrity != integrity:
        raise SettingsConflict(document)
    data = jsonpatch.patch_object(document.data, patch, kind=kind, what="settings")
    if not all(isinstance(value, dict) for value in data.values()):
        raise ApplicationError(
            "Settings are namespaced: a JSON object whose every value is an object (one per extension).",
            {"field": "settings"},
        )
    reason = unstorable_reason(data)
    if reason:
        raise ApplicationError(f"The settings {reason}.", {"field": "settings"})
    document.data = data
    document.integrity = uuid.uuid4()
    document.save(update_fields=["data", "integrity", "updated_at"])
    return document


def _pointer(path: tuple[str, ...]) -> str:
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


@transaction.atomic
def settings_document_set(
    *, user: AbstractUser, values: dict[tuple[str, ...], Any], integrity: uuid.UUID
) -> SettingsDocument:
    """Set each given leaf (a path of object keys, the first a namespace) and nothing else, as one JSON Patch
    applied only if the document is still at `integrity` (otherwise 409, as for any client). A missing object on
    the way is added, one that is not an object is replaced by one; every other key and namespace is untouched."""
    settings_document_get(user=user)
    document = SettingsDocument.objects.select_for_update().get(user=user)
    if document.integrity != integrity:
        raise SettingsConflict(document)
    patch: list[dict[str, Any]] = []
    made: set[tuple[str, ...]] = set()  # objects this patch adds
    for path, value in values.items():
        node: Any = document.data
        for depth, key in enumerate(path):
            here = path[: depth + 1]
            exists = here in made or (isinstance(node, dict) and key in node)
            if depth == len(path) - 1:
                patch.append({"op": "replace" if exists else "add", "path": _pointer(here), "value": value})
            elif here in made:
                node = None
            elif isinstance(node, dict) and isinstance(node.get(key), dict):
                node = node[key]
            else:
                patch.append({"op": "replace" if exists else "add", "path": _pointer(here), "value": {}})
                made.add(here)
                node = None
    if not patch:
        return document
    return settings_document_patch(user=user, patch=patch, kind="json", integrity=integrity)
