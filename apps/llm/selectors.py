from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractUser
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from apps.llm.models import Budget, Call, Connection, SamplerPreset


def connection_list(*, user: AbstractUser) -> QuerySet[Connection]:
    return Connection.objects.filter(user=user)


def connection_get(*, user: AbstractUser, connection_id: int) -> Connection:
    connection = Connection.objects.filter(user=user, pk=connection_id).first()
    if connection is None:
        raise Http404("No such connection.")
    return connection


def connection_default(*, user_id: int) -> Connection | None:
    """The connection background memory work uses (the person ticked it), or None."""
    return Connection.objects.filter(user_id=user_id, is_default=True).first()


def connection_for_replies(*, user_id: int) -> Connection | None:
    """The connection a chat reply uses when none is named: the default, else the person's first (a reply is asked
    for by the person, so it needs no tick)."""
    return Connection.objects.filter(user_id=user_id).order_by("-is_default", "created_at", "id").first()


# Calls a person makes and waits for; every other purpose is background memory work (extraction:<tier>,
# supersession, consolidation, hierarchy.<period>), which the daily limit counts.
FOREGROUND_PURPOSES, FOREGROUND_PREFIX = ("chat", "connection_test"), "model_test:"
FOREGROUND = Q(purpose__in=FOREGROUND_PURPOSES) | Q(purpose__startswith=FOREGROUND_PREFIX)
LIMIT_MESSAGE = "Paused: today's token limit for background work is reached; it starts again at midnight."


def is_background(purpose: str) -> bool:
    return purpose not in FOREGROUND_PURPOSES and not purpose.startswith(FOREGROUND_PREFIX)


def background_calls(*, user_id: int) -> QuerySet[Call]:
    return Call.objects.filter(user_id=user_id).exclude(FOREGROUND)


def background_tokens_since(*, user_id: int, since: datetime) -> int:
    """Prompt and reply tokens background work spent since `since`."""
    total = (
        background_calls(user_id=user_id)
        .filter(created_at__gte=since)
        .aggregate(tokens=Coalesce(Sum(F("prompt_tokens") + F("completion_tokens")), 0))
    )
    return int(total["tokens"])


def day_start(now: datetime | None = None) -> datetime:
    """Midnight of today in the server's time zone: when the daily limit starts again."""
    local = timezone.localtime(now or timezone.now())
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


def daily_limit(*, user_id: int) -> int | None:
    """The person's daily token limit for background work, or None."""
    return Budget.objects.filter(user_id=user_id).values_list("daily_tokens", flat=True).first()


def limit_reached(*, user_id: int) -> bool:
    """Has background work spent the person's tokens for today?"""
    limit = daily_limit(user_id=user_id)
    return limit is not None and background_tokens_since(user_id=user_id, since=day_start()) >= limit


def background_seconds_per_call(*, connection: Connection) -> float | None:
    """The median time of the connection's last 50 answered background calls, or None before any."""
    latencies = sorted(
        background_calls(user_id=connection.user_id)
        .filter(connection=connection, status=Call.Status.OK)
        .order_by("-created_at")
        .values_list("latency_ms", flat=True)[:50]
    )
    return latencies[len(latencies) // 2] / 1000 if latencies else None


def background_usage(*, days: int = 30, now: datetime | None = None) -> list[dict]:
    """For the admin: each user's background calls and tokens today and over `days` days, most tokens first."""
    today, since = day_start(now), day_start(now) - timedelta(days=days - 1)
    tokens = F("prompt_tokens") + F("completion_tokens")
    return list(
        Call.objects.exclude(FOREGROUND)
        .filter(created_at__gte=since)
        .values("user_id", "user__username")
        .annotate(
            calls=Count("id"),
            tokens=Coalesce(Sum(tokens), 0),
            tokens_today=Coalesce(Sum(tokens, filter=Q(created_at__gte=today)), 0),
        )
        .order_by("-tokens")
    )


def call_list(*, user: AbstractUser, status: str | None = None) -> QuerySet[Call]:
    calls = Call.objects.filter(user=user).select_related("connection")
    return calls.filter(status=status) if status else calls


def sampler_preset_list(*, user: AbstractUser) -> QuerySet[SamplerPreset]:
    return SamplerPreset.objects.filter(user=user)


def sampler_preset_get(*, user: AbstractUser, preset_id: int) -> SamplerPreset:
    preset = SamplerPreset.objects.filter(user=user, pk=preset_id).first()
    if preset is None:
        raise Http404("No such preset.")
    return preset
