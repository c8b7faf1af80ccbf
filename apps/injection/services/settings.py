"""Injection settings (docs/GLOSSARY.md, slot): which of the 13 slots are on and at what depth, unified mode, macro
force mode, the 10 per-tier budgets in simple or advanced mode, auto-tune and adaptive budgets.

They live in the user's settings document (`/api/v1/settings`), namespace `smart_memory`, like any extension's:
read leniently (a value a client wrote out of range falls back to its default, and the page says so), saved
strictly through the document's patch service with its integrity check.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractUser

from apps.accounts.models import SettingsDocument
from apps.accounts.services import settings_document_get, settings_document_patch
from apps.common.exceptions import ApplicationError

NAMESPACE = "smart_memory"
IN_PROMPT, IN_CHAT = "in_prompt", "in_chat"


@dataclass(frozen=True)
class SlotSpec:
    name: str
    label: str
    tier: str | None  # the budget it draws from (None: repair, one note; unified: the sum of its members)
    position: str
    depth: int

    @property
    def key(self) -> str:
        return f"smart_memory_{self.name}"

    @property
    def macro(self) -> str:
        return "{{smartmemory-" + self.name.replace("_", "-") + "}}"


# Smart Memory's 13 named slots with its positions and default depths.
SLOTS: tuple[SlotSpec, ...] = (
    SlotSpec("short", "Story so far", "short", IN_PROMPT, 0),
    SlotSpec("long", "Long-term memories", "long", IN_PROMPT, 0),
    SlotSpec("profiles", "Profiles", "profiles", IN_PROMPT, 1),
    SlotSpec("canon", "Canon", "canon", IN_PROMPT, 0),
    SlotSpec("triggered", "Recalled for this turn", "long", IN_CHAT, 4),
    SlotSpec("session", "This session", "session", IN_CHAT, 3),
    SlotSpec("scenes", "Earlier scenes", "scenes", IN_CHAT, 6),
    SlotSpec("arcs", "Story arcs", "arcs", IN_CHAT, 2),
    SlotSpec("relationships", "Relationships", "relationships", IN_CHAT, 5),
    SlotSpec("epistemic", "What the character knows", "epistemic", IN_CHAT, 1),
    SlotSpec("state_ledger", "Current state", "state_ledger", IN_CHAT, 1),
    SlotSpec("repair", "Continuity note", None, IN_CHAT, 0),
    SlotSpec("unified", "Memory", None, IN_PROMPT, 0),
)
SLOT = {slot.name: slot for slot in SLOTS}
# The 10 budgeted tiers and Smart Memory's defaults (tokens); the short-term summary has its own.
TIERS = (
    "short",
    "long",
    "session",
    "scenes",
    "arcs",
    "canon",
    "profiles",
    "relationships",
    "epistemic",
    "state_ledger",
)
DEFAULT_BUDGETS = {
    "short": 1000,
    "long": 500,
    "session": 400,
    "scenes": 300,
    "arcs": 700,
    "canon": 800,
    "profiles": 400,
    "relationships": 250,
    "epistemic": 200,
    "state_ledger": 200,
}
# 10 per-tier macros and the unified one (triggered and repair have none).
MACRO_SLOTS = tuple(slot.name for slot in SLOTS if slot.name not in ("triggered", "repair"))
# Unified mode's one block, in Smart Memory's order.
UNIFIED_ORDER = ("canon", "profiles", "long", "short", "scenes", "session", "arcs")
BUDGET_MODES = ("simple", "advanced")
MAX_BUDGET = 32000
MAX_DEPTH = 100


@dataclass
class InjectionSettings:
    # Every slot on; the unified one is delivered only in unified mode (and then instead of the others).
    enabled: dict[str, bool] = field(default_factory=lambda: {slot.name: True for slot in SLOTS})
    depths: dict[str, int] = field(default_factory=lambda: {slot.name: slot.depth for slot in SLOTS})
    unified: bool = False
    force_macros: bool = False
    budget_mode: str = "advanced"
    total_budget: int = sum(DEFAULT_BUDGETS.values())
    budgets: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_BUDGETS))
    auto_tune: bool = False
    adaptive: bool = False
    triggered_limit: int = 8
    recall_messages: bool = True
    recent_messages: int = 30
    problems: list[str] = field(default_factory=list)  # values found out of range (replaced by defaults)

    def as_document(self) -> dict[str, Any]:
        return {
            "slots": {name: {"enabled": self.enabled[name], "depth": self.depths[name]} for name in SLOT},
            "unified": self.unified,
            "force_macros": self.force_macros,
            "budget_mode": self.budget_mode,
            "total_budget": self.total_budget,
            "budgets": dict(self.budgets),
            "auto_tune": self.auto_tune,
            "adaptive": self.adaptive,
            "triggered_limit": self.triggered_limit,
            "recall_messages": self.recall_messages,
            "recent_messages": self.recent_messages,
        }


Problem = Callable[[str, str], None]  # notes a bad value: (field, message)


def _int(value: Any, low: int, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        return None
    return int(value) if low <= value <= high else None


def _read(raw: dict[str, Any], *, strict: bool) -> InjectionSettings:
    """Settings from the namespace's object. Lenient: a bad value keeps its default and is listed in `problems`;
    strict (a save): it is an ApplicationError naming the field."""
    result = InjectionSettings()
    problems: list[tuple[str, str]] = []

    def bad(name: str, message: str) -> None:
        problems.append((name, message))

    _read_slots(raw, result, bad)
    _read_options(raw, result, bad)
    _read_budgets(raw, result, bad)
    if strict and problems:
        name, message = problems[0]
        raise ApplicationError(f"{message[0].upper()}{message[1:]}.", {"field": name})
    result.problems = [message for _, message in problems]
    return result


def _read_slots(raw: dict[str, Any], result: InjectionSettings, bad: Problem) -> None:
    """Whether each slot is on and at what depth."""
    slots = raw.get("slots", {})
    if not isinstance(slots, dict):
        bad("slots", "slots is an object of slot names")
        slots = {}
    for name, value in slots.items():
        if name not in SLOT:
            bad(f"slots.{name}", f"there is no slot {name!r}")
            continue
        if not isinstance(value, dict):
            bad(f"slots.{name}", "each slot is an object with enabled and depth")
            continue
        if "enabled" in value:
            if isinstance(value["enabled"], bool):
                result.enabled[name] = value["enabled"]
            else:
                bad(f"slots.{name}.enabled", f"whether {name} is on is true or false")
        if "depth" in value:
            depth = _int(value["depth"], 0, MAX_DEPTH)
            if depth is None:
                bad(f"slots.{name}.depth", f"the depth of {name} is a whole number from 0 to {MAX_DEPTH}")
            else:
                result.depths[name] = depth


def _read_options(raw: dict[str, Any], result: InjectionSettings, bad: Problem) -> None:
    """The switches, the budget mode and the whole-number settings."""
    for name in ("unified", "force_macros", "auto_tune", "adaptive", "recall_messages"):
        if name in raw:
            if isinstance(raw[name], bool):
                setattr(result, name, raw[name])
            else:
                bad(name, f"{name} is true or false")
    if "budget_mode" in raw:
        if raw["budget_mode"] in BUDGET_MODES:
            result.budget_mode = raw["budget_mode"]
        else:
            bad("budget_mode", "budget_mode is simple or advanced")
    for name, low, high in (
        ("total_budget", 100, MAX_BUDGET * 4),
        ("triggered_limit", 0, 50),
        ("recent_messages", 0, 500),
    ):
        if name in raw:
            value = _int(raw[name], low, high)
            if value is None:
                bad(name, f"{name} is a whole number from {low} to {high}")
            else:
                setattr(result, name, value)


def _read_budgets(raw: dict[str, Any], result: InjectionSettings, bad: Problem) -> None:
    """The per-tier token budgets."""
    budgets = raw.get("budgets", {})
    if not isinstance(budgets, dict):
        bad("budgets", "budgets is an object of tiers")
        budgets = {}
    for tier, value in budgets.items():
        if tier not in DEFAULT_BUDGETS:
            bad(f"budgets.{tier}", f"there is no tier {tier!r}")
            continue
        tokens = _int(value, 0, MAX_BUDGET)
        if tokens is None:
            bad(
                f"budgets.{tier}",
                f"the {tier.replace('_', ' ')} budget is a whole number of tokens from 0 to {MAX_BUDGET}",
            )
        else:
            result.budgets[tier] = tokens


def injection_settings_get(*, user: AbstractUser, document: SettingsDocument | None = None) -> InjectionSettings:
    document = document or settings_document_get(user=user)
    raw = document.data.get(NAMESPACE, {})
    return _read(raw if isinstance(raw, dict) else {}, strict=False)


def injection_settings_save(*, user: AbstractUser, values: dict[str, Any], integrity: uuid.UUID) -> InjectionSettings:
    """Store these settings (checked strictly; what is not given keeps its default) in the namespace, if the
    document is still at `integrity` (otherwise 409, as for any client of the settings document). A merge patch:
    other keys a client keeps in the namespace, and other namespaces, are untouched."""
    settings = _read(values, strict=True)
    document = settings_document_patch(
        user=user, patch={NAMESPACE: settings.as_document()}, kind="merge", integrity=integrity
    )
    return injection_settings_get(user=user, document=document)
