"""World Info settings per account (docs/LOREBOOKS.md, "Settings"): SillyTavern's activation settings (scan depth,
budget and its cap, recursion, case, whole words, names, group scoring, the character strategy, minimum activations
and the maximum recursion steps), SillyTavern's defaults where not set.

They live in the user's settings document (`/api/v1/settings`), namespace `world_info`, as the injection settings
do: read leniently (a value a client wrote out of range falls back to its default, and the page says so), saved
strictly through the document's patch service with its integrity check.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from django.contrib.auth.models import AbstractUser

from apps.accounts.models import SettingsDocument
from apps.accounts.services import settings_document_get, settings_document_patch
from apps.common.exceptions import ApplicationError
from apps.lorebooks.services.buffer import Settings

NAMESPACE = "world_info"
# name: (kind, lowest, highest, label) as SillyTavern's World Info panel bounds them; bools have no range.
FIELDS: dict[str, tuple[type, int, int, str]] = {
    "depth": (int, 0, 1000, "Scan depth (messages)"),
    "budget": (int, 1, 100, "Context share (%)"),
    "budget_cap": (int, 0, 65536, "Budget cap (tokens, 0: none)"),
    "min_activations": (int, 0, 100, "Minimum activations"),
    "min_activations_depth_max": (int, 0, 1000, "Max depth for minimum activations (0: unlimited)"),
    "max_recursion_steps": (int, 0, 10, "Max recursion steps (0: unlimited)"),
    "character_strategy": (int, 0, 2, "Insertion strategy"),
    "include_names": (bool, 0, 0, "Include names"),
    "recursive": (bool, 0, 0, "Recursive scan"),
    "case_sensitive": (bool, 0, 0, "Case-sensitive"),
    "match_whole_words": (bool, 0, 0, "Match whole words"),
    "use_group_scoring": (bool, 0, 0, "Use group scoring"),
}
STRATEGIES = {0: "Sorted evenly", 1: "Character lore first", 2: "Global lore first"}


def _problem(name: str, value: Any) -> str | None:
    kind, low, high, label = FIELDS[name]
    if kind is bool:
        return None if isinstance(value, bool) else f"{label} is true or false"
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return f"{label} is a whole number from {low} to {high}"
    return None


def lore_settings_read(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from the namespace's object, leniently: a bad value keeps its default and is listed."""
    values, problems = {}, []
    for name, value in (raw if isinstance(raw, dict) else {}).items():
        if name not in FIELDS:
            continue  # a key another client keeps in the namespace
        problem = _problem(name, value)
        if problem:
            problems.append(f"{problem}: the default is used.")
        else:
            values[name] = value
    return dataclasses.replace(Settings(), **values), problems


def lore_settings_get(*, user: AbstractUser, document: SettingsDocument | None = None) -> Settings:
    document = document or settings_document_get(user=user)
    return lore_settings_read((document.data or {}).get(NAMESPACE))[0]


def lore_settings_save(*, user: AbstractUser, values: Any, integrity: uuid.UUID) -> Settings:
    """Store these settings (each checked; one out of range refuses the save, naming it) in the namespace, if the
    document is still at `integrity` (otherwise 409). A merge patch: what is not given is kept."""
    if not isinstance(values, dict):
        raise ApplicationError("The settings are an object.", {"field": NAMESPACE})
    for name, value in values.items():
        if name not in FIELDS:
            raise ApplicationError(f"There is no World Info setting {name!r}.", {"field": name})
        problem = _problem(name, value)
        if problem:
            raise ApplicationError(f"{problem}.", {"field": name})
    document = settings_document_patch(user=user, patch={NAMESPACE: values}, kind="merge", integrity=integrity)
    return lore_settings_get(user=user, document=document)
