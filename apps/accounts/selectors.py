from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db.models import QuerySet

from apps.accounts.models import ApiToken


def api_token_list(*, user: AbstractUser) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")
