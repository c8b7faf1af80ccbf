"""Each user's settings document, namespaced per extension, patched like chat metadata."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.common import jsonpatch
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason
from apps.sync.models import SettingsDocument


class SettingsConflict(ApplicationError):
    def __init__(self, document: SettingsDocument) -> None:
        super().__init__(
            "The settings were changed by another client since you read them; read them again and re-apply.",
            {"current_integrity": str(document.integrity)},
            status=409,
            code="integrity",
        )


def settings_get(*, user: AbstractUser) -> SettingsDocument:
    """The user's document, made empty on first use (ON CONFLICT DO NOTHING: two first reads cannot collide)."""
    document = SettingsDocument.objects.filter(user=user).first()
    if document is None:
        SettingsDocument.objects.bulk_create([SettingsDocument(user=user)], ignore_conflicts=True)
        document = SettingsDocument.objects.get(user=user)
    return document


@transaction.atomic
def settings_patch(*, user: AbstractUser, patch: Any, kind: str, integrity: uuid.UUID) -> SettingsDocument:
    """`kind` "merge" (RFC 7386) or "json" (RFC 6902). Top-level keys are extension namespaces, each an object."""
    settings_get(user=user)
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
