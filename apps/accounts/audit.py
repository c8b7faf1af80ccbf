"""Writing the audit log (AuditEvent). Never given a secret: tokens appear by name and prefix only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser

from apps.accounts.models import AuditEvent


def client_ip(request) -> str | None:
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def audit_record(
    *,
    action: str,
    user: AbstractUser | None = None,
    actor: AbstractUser | None = None,
    target: str = "",
    ip: str | None = None,
    **detail: Any,
) -> AuditEvent:
    return AuditEvent.objects.create(
        action=action, user=user, actor=actor or user, target=target[:200], ip=ip, detail=detail
    )
