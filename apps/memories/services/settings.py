"""A user's own embedding provider. Changing what vectors are made with re-embeds the user's memories in the
background (search meanwhile finds the not yet re-embedded ones by text only: vectors of two models are never
compared)."""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.common.exceptions import ApplicationError
from apps.common.netguard import provider_url_check
from apps.common.secrets import secret_encrypt
from apps.memories.embeddings import DEFAULT_MODELS, DEFAULT_URLS, config_for
from apps.memories.models import EmbeddingSettings, LifecycleSettings
from apps.memories.services.memories import embed_later

_KEEP = object()


@dataclass
class EmbeddingSettingsView:
    provider: str  # "deployment" when the user has none of their own
    model: str
    base_url: str
    dimensions: int | None
    model_key: str
    has_api_key: bool


def embedding_settings_get(*, user: AbstractUser) -> EmbeddingSettingsView:
    own = EmbeddingSettings.objects.filter(user=user).first()
    config = config_for(user)
    if own is None:
        return EmbeddingSettingsView("deployment", config.model, "", config.dimensions, config.key, False)
    return EmbeddingSettingsView(
        own.provider, own.model, own.base_url, own.dimensions, config.key, bool(own.api_key_encrypted)
    )


@transaction.atomic
def embedding_settings_set(
    *,
    user: AbstractUser,
    provider: str,
    model: str = "",
    base_url: str = "",
    api_key=_KEEP,
    dimensions: int | None = None,
) -> EmbeddingSettingsView:
    """`provider="deployment"` removes the user's own settings. An omitted `api_key` keeps the stored one; "" clears
    it."""
    before = config_for(user).key
    if provider == "deployment":
        EmbeddingSettings.objects.filter(user=user).delete()
    else:
        if provider in ("openai", "ollama") and not (model or DEFAULT_MODELS.get(provider)):
            raise ApplicationError("Name the embedding model.", {"field": "model"})
        if provider == "local" and base_url:
            raise ApplicationError("The local provider takes no URL.", {"field": "base_url"})
        if base_url or provider in DEFAULT_URLS:
            provider_url_check(base_url or DEFAULT_URLS[provider])  # a default URL meets the same policy
        own, _ = EmbeddingSettings.objects.select_for_update().get_or_create(
            user=user, defaults={"provider": provider}
        )
        own.provider, own.model, own.base_url, own.dimensions = provider, model, base_url, dimensions
        if api_key is not _KEEP:
            own.api_key_encrypted = secret_encrypt(api_key or "")
        own.save()
    if config_for(user).key != before:
        embed_later(user_id=user.pk)
    return embedding_settings_get(user=user)


def lifecycle_settings_get(*, user: AbstractUser) -> LifecycleSettings:
    return LifecycleSettings.objects.filter(user=user).first() or LifecycleSettings(user=user)


@transaction.atomic
def lifecycle_settings_set(
    *, user: AbstractUser, time_zone: str | None = None, hierarchy_enabled: bool | None = None
) -> LifecycleSettings:
    own, _ = LifecycleSettings.objects.select_for_update().get_or_create(user=user)
    if time_zone is not None:
        try:
            ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # "Europe" is a folder of zones: OSError
            raise ApplicationError(
                f"Unknown time zone {time_zone!r} (use an IANA name).", {"field": "time_zone"}
            ) from exc
        own.time_zone = time_zone
    if hierarchy_enabled is not None:
        own.hierarchy_enabled = hierarchy_enabled
    own.save()
    return own
