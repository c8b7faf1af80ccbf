from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db.models import QuerySet
from django.http import Http404

from apps.llm.models import Call, Connection, SamplerPreset


def connection_list(*, user: AbstractUser) -> QuerySet[Connection]:
    return Connection.objects.filter(user=user)


def connection_get(*, user: AbstractUser, connection_id: int) -> Connection:
    connection = Connection.objects.filter(user=user, pk=connection_id).first()
    if connection is None:
        raise Http404("No such connection.")
    return connection


def connection_default(*, user_id: int) -> Connection | None:
    """The connection background memory work uses, or None when the user has none."""
    return Connection.objects.filter(user_id=user_id, is_default=True).first()


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
