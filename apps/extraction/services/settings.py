"""A user's extraction settings (the page and `GET/PUT /api/v1/extraction/settings`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.common.exceptions import ApplicationError
from apps.common.services import model_update
from apps.extraction.models import AutoChoice, ExtractionSettings
from apps.extraction.services.jobs import pipelines_wake
from apps.llm.selectors import daily_limit
from apps.llm.services import budget_set

# Field: (lowest, highest) accepted.
RANGES: dict[str, tuple[float, float]] = {
    "batch_every": (1, 500),
    "batch_max": (1, 500),
    "context_tokens": (1024, 2_000_000),
    "compaction_share": (0.1, 1.0),
    "min_scene_messages": (2, 500),
    "profile_every": (1, 5000),
    "profile_stale_minutes": (1, 10080),
    "recap_after_hours": (0.25, 24 * 365),
    "auto_rebuild_max": (0, 5000),
}
FLAGS = ("enabled", "scene_model_check", "auto_extract")
CHOICES = ("canon_auto", "continuity_auto")
FIELDS = (*RANGES, *FLAGS, *CHOICES)


def extraction_settings_get(*, user: AbstractUser | None = None, user_id: int | None = None) -> ExtractionSettings:
    """The user's settings, or the defaults (unsaved) when they never changed them."""
    user_id = user_id if user_id is not None else user.pk
    return ExtractionSettings.objects.filter(user_id=user_id).first() or ExtractionSettings(user_id=user_id)


@transaction.atomic
def extraction_settings_set(*, user: AbstractUser, data: dict[str, Any]) -> ExtractionSettings:
    own, _ = ExtractionSettings.objects.select_for_update().get_or_create(user=user)
    values = {key: value for key, value in data.items() if key in FIELDS}
    for key, value in values.items():
        if key in RANGES:
            low, high = RANGES[key]
            if not low <= value <= high:
                raise ApplicationError(f"{key} is between {low:g} and {high:g}.", {"field": key})
        if key in CHOICES and value not in AutoChoice.values:
            raise ApplicationError(f"{key} is one of {', '.join(AutoChoice.values)}.", {"field": key})
    if values.get("batch_max", own.batch_max) < values.get("batch_every", own.batch_every):
        raise ApplicationError("batch_max must be at least batch_every.", {"field": "batch_max"})
    limit_changed = "daily_token_limit" in data and data["daily_token_limit"] != daily_limit(user_id=user.pk)
    if limit_changed:  # kept with the models' budget (apps/llm), asked for here
        budget_set(user=user, daily_tokens=data["daily_token_limit"])
    own, _ = model_update(instance=own, fields=list(FIELDS), data=values)
    if values.get("auto_extract") or limit_changed:
        # Histories that waited for the person, and work the limit paused, may go on now.
        pipelines_wake(user_id=own.user_id)
    return own


def automatic(choice: str, *, profile: str) -> bool:
    """An `auto` setting is on for hosted models (profile B) and off for local ones (A), as in Smart Memory
    (docs/GLOSSARY.md)."""
    return choice == AutoChoice.ON or (choice == AutoChoice.AUTO and profile == "B")
