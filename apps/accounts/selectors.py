from __future__ import annotations

from django.contrib.auth.models import AbstractUser

from apps.accounts.models import ApiToken

REVOKED_SHOWN = 20  # revoked tokens listed, the last revoked first: the rest only count


def api_token_list(*, user: AbstractUser) -> list[ApiToken]:
    """The person's tokens in use, the newest first (at most services.MAX_ACTIVE_TOKENS), then the REVOKED_SHOWN
    they revoked last."""
    active = ApiToken.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at", "-id")
    revoked = ApiToken.objects.filter(user=user, revoked_at__isnull=False).order_by("-revoked_at", "-id")
    return [*active, *revoked[:REVOKED_SHOWN]]


def api_tokens_revoked_count(*, user: AbstractUser) -> int:
    return ApiToken.objects.filter(user=user, revoked_at__isnull=False).count()
