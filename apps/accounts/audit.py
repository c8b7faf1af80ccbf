"""Writing the audit log (AuditEvent). Never given a secret: tokens appear by name and prefix only."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractUser

from apps.accounts.models import AuditEvent


def client_ip(request) -> str | None:
    """The client's address. Behind LOREKEEPER_PROXY_HOPS proxies (each appending the address it saw to
    X-Forwarded-For) it is the entry that many from the right: what the nearest proxies saw, never what the client
    wrote itself. Without proxies, or with a header too short, the connection's own address."""
    if request is None:
        return None
    hops = settings.LOREKEEPER_PROXY_HOPS
    if hops > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= hops:
            candidate = forwarded[-hops]
            try:
                return str(ipaddress.ip_address(candidate))
            except ValueError:
                pass
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
