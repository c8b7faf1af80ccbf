from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth.models import AbstractUser
from django.db.models import Count, DecimalField, ExpressionWrapper, F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
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


# Why background memory work waits: no connection, or none ticked for it (a reply needs no tick, so the person may
# have chatted for an hour with one that is not).
NO_BACKGROUND_MODEL = (
    'No connection does background memory work: add one on the Models page, or tick "Use for background memory work"'
    " on yours"
)


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


@dataclass(frozen=True)
class DailyTokens:
    days: list[date]
    background: list[int]  # prompt and reply tokens per day
    foreground: list[int]
    cost: Decimal | None  # at the prices of the calls' connections, None when none has a price
    unpriced_tokens: int  # of calls whose connection has no price (or is gone): not in the cost

    @property
    def background_total(self) -> int:
        return sum(self.background)

    @property
    def foreground_total(self) -> int:
        return sum(self.foreground)

    @property
    def total(self) -> int:
        return self.background_total + self.foreground_total


PRICED = Q(connection__price_prompt__isnull=False) | Q(connection__price_reply__isnull=False)
CALL_COST = ExpressionWrapper(
    (
        F("prompt_tokens") * Coalesce(F("connection__price_prompt"), Value(Decimal(0)))
        + F("completion_tokens") * Coalesce(F("connection__price_reply"), Value(Decimal(0)))
    )
    / Value(Decimal(1_000_000)),
    output_field=DecimalField(max_digits=24, decimal_places=8),
)


def call_tokens_by_day(*, user: AbstractUser, days: int = 30, now: datetime | None = None) -> DailyTokens:
    """The person's tokens per day over `days` days, today included: background memory work and what they asked
    for apart, and what they cost at the prices set on the connections (today's prices, for every day)."""
    start = day_start(now) - timedelta(days=days - 1)
    tokens = F("prompt_tokens") + F("completion_tokens")
    calls = Call.objects.filter(user=user, created_at__gte=start).order_by()
    rows = {
        row["day"]: row
        for row in calls.annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(
            background=Coalesce(Sum(tokens, filter=~FOREGROUND), 0),
            foreground=Coalesce(Sum(tokens, filter=FOREGROUND), 0),
        )
    }
    money = calls.aggregate(
        cost=Sum(CALL_COST, filter=PRICED),
        priced=Count("id", filter=PRICED),
        unpriced=Coalesce(Sum(tokens, filter=~PRICED), 0),
    )
    span = [start.date() + timedelta(days=i) for i in range(days)]
    return DailyTokens(
        days=span,
        background=[rows[day]["background"] if day in rows else 0 for day in span],
        foreground=[rows[day]["foreground"] if day in rows else 0 for day in span],
        cost=(money["cost"] or Decimal(0)) if money["priced"] else None,
        unpriced_tokens=money["unpriced"],
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
