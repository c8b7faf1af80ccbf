"""The settings document's fields Lorekeeper itself knows, as a form: one fieldset per section, each field a leaf of
the document (`smart_memory`, the injection settings: apps/injection/services/settings.py). Every field carries the
value the page was loaded with (Django's hidden initial), so a save writes only what the person changed, and after
a conflict the form can keep their changes over the values saved meanwhile."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from apps.injection.services.settings import (
    BUDGET_MODES,
    DEFAULT_BUDGETS,
    IN_CHAT,
    MAX_BUDGET,
    MAX_DEPTH,
    NAMESPACE,
    SLOT,
    SLOTS,
    TIERS,
    InjectionSettings,
)

# The ranges the injection settings are read with (apps/injection/services/settings.py `_read_options`).
TOTAL_BUDGET = (100, MAX_BUDGET * 4)
TRIGGERED_LIMIT = (0, 50)
RECENT_MESSAGES = (0, 500)
BUDGET_MODE_LABELS = {"simple": "Simple: one shared total", "advanced": "Advanced: one budget each"}


@dataclass(frozen=True)
class Known:
    path: tuple[str, ...]  # where it lives in the document, its namespace first
    field: forms.Field


@dataclass(frozen=True)
class Section:
    slug: str
    title: str
    help: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    field: forms.BoundField
    note: str  # what changed elsewhere meanwhile, after a conflict


def _number(low: int, high: int, label: str, help_text: str = "") -> forms.IntegerField:
    message = f"A whole number from {low} to {high}."
    return forms.IntegerField(
        min_value=low,
        max_value=high,
        label=label,
        help_text=help_text,
        error_messages={code: message for code in ("required", "invalid", "min_value", "max_value")},
    )


def _switch(label: str, help_text: str = "") -> forms.BooleanField:
    return forms.BooleanField(required=False, label=label, help_text=help_text)


def _known() -> dict[str, Known]:
    known: dict[str, Known] = {}
    for slot in SLOTS:
        where = "in the chat" if slot.position == IN_CHAT else "in the prompt"
        known[f"slot_{slot.name}_on"] = Known(("slots", slot.name, "enabled"), _switch(slot.label, f"Placed {where}."))
        depth = _number(0, MAX_DEPTH, f"{slot.label}: depth")
        depth.widget.attrs["aria-label"] = depth.label  # shown as "depth" beside the slot's switch
        known[f"slot_{slot.name}_depth"] = Known(("slots", slot.name, "depth"), depth)
    known["unified"] = Known(
        ("unified",),
        _switch(
            "Unified mode",
            "One block of memory (canon, profiles, long-term, story so far, scenes, session, arcs) instead of "
            "the separate slots.",
        ),
    )
    known["force_macros"] = Known(
        ("force_macros",),
        _switch(
            "Fill every macro",
            "Fill every {{smartmemory-…}} macro, not only those found in the character's card (for macros in "
            "instruct templates).",
        ),
    )
    known["budget_mode"] = Known(
        ("budget_mode",),
        forms.ChoiceField(
            choices=[(mode, BUDGET_MODE_LABELS[mode]) for mode in BUDGET_MODES],
            label="Budget mode",
            help_text="How many tokens of memory a reply may get.",
            error_messages={"invalid_choice": "Choose simple or advanced.", "required": "Choose simple or advanced."},
        ),
    )
    known["total_budget"] = Known(
        ("total_budget",), _number(*TOTAL_BUDGET, "Total budget (tokens)", "Used in simple mode, shared by all.")
    )
    for tier in TIERS:
        known[f"budget_{tier}"] = Known(
            ("budgets", tier),
            _number(0, MAX_BUDGET, f"{SLOT[tier].label} (tokens)", f"Default {DEFAULT_BUDGETS[tier]}."),
        )
    known["auto_tune"] = Known(
        ("auto_tune",), _switch("Auto-tune", "Size each budget from what it needed lately, with 15% to spare.")
    )
    known["adaptive"] = Known(
        ("adaptive",),
        _switch("Adaptive budgets", "Weigh the budgets by the kind of turn: dialogue, action, transition, intimate."),
    )
    known["triggered_limit"] = Known(
        ("triggered_limit",), _number(*TRIGGERED_LIMIT, "Memories recalled at most", "For each reply.")
    )
    known["recent_messages"] = Known(
        ("recent_messages",),
        _number(*RECENT_MESSAGES, "Recent messages left out of recall", "They are in the prompt anyway."),
    )
    known["recall_messages"] = Known(
        ("recall_messages",), _switch("Recall older chat messages too", "Not only memories.")
    )
    return {name: Known((NAMESPACE, *item.path), item.field) for name, item in known.items()}


KNOWN = _known()
SECTIONS = (
    Section(
        "slots",
        "Memory slots",
        "Which slots a client gets before each reply, and at what depth: how many messages back from the newest "
        "one a slot put in the chat goes (0: after the newest).",
        tuple(name for slot in SLOTS for name in (f"slot_{slot.name}_on", f"slot_{slot.name}_depth")),
    ),
    Section("delivery", "How memory is given", "", ("unified", "force_macros")),
    Section(
        "budgets",
        "Budgets",
        "In advanced mode each kind of memory has its own budget; in simple mode they share the total.",
        ("budget_mode", "total_budget", "auto_tune", "adaptive", *(f"budget_{tier}" for tier in TIERS)),
    ),
    Section("recall", "Recall for each reply", "", ("triggered_limit", "recent_messages", "recall_messages")),
)
KNOWN_KEYS = frozenset(InjectionSettings().as_document())  # the namespace's own top-level keys


def _at(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def _shown(field: forms.Field, value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(field, forms.ChoiceField):
        return dict(field.choices).get(value, str(value))
    return str(value)


class KnownSettingsForm(forms.Form):
    """The known fields, on `current` (each namespace's settings as Lorekeeper reads them, defaults filled in)."""

    def __init__(self, *args: Any, current: dict[str, dict[str, Any]], **kwargs: Any) -> None:
        current_values = {name: _at(current, known.path) for name, known in KNOWN.items()}
        super().__init__(*args, initial=current_values, **kwargs)
        for name, known in KNOWN.items():
            self.fields[name] = copy.deepcopy(known.field)
            self.fields[name].show_hidden_initial = True
        self.notes: dict[str, str] = {}

    def changes(self) -> dict[tuple[str, ...], Any]:
        """The document's leaves the person changed, with their new values (call after is_valid)."""
        return {KNOWN[name].path: self.cleaned_data[name] for name in self.changed_data}

    def sections(self) -> list[tuple[Section, list[Item]]]:
        return [
            (section, [Item(self[name], self.notes.get(name, "")) for name in section.names]) for section in SECTIONS
        ]

    def _seen(self, name: str) -> Any:
        """The value this person's page was loaded with."""
        field = self.fields[name]
        raw = field.hidden_widget().value_from_datadict(self.data, self.files, self[name].html_initial_name)
        try:
            return field.to_python(raw)
        except ValidationError:
            return None

    def over(self, *, current: dict[str, dict[str, Any]]) -> KnownSettingsForm:
        """After a conflict: a form on the values saved now, with this person's changes kept over them (so saving it
        applies just those), and a note on each field changed elsewhere meanwhile."""
        now = KnownSettingsForm(current=current).initial
        changed = self.changes()
        data: dict[str, Any] = {}
        notes: dict[str, str] = {}
        for name, known in KNOWN.items():
            data[name] = changed[known.path] if known.path in changed else now[name]
            data[self[name].html_initial_name] = now[name]
            if now[name] != self._seen(name):
                shown = _shown(self.fields[name], now[name])
                notes[name] = (
                    f"Changed elsewhere to {shown}; yours is kept here."
                    if known.path in changed and now[name] != data[name]
                    else f"Changed elsewhere to {shown}."
                )
        form = KnownSettingsForm(data, current=current)
        form.notes = notes
        return form


def settings_others(data: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
    """The keys of Lorekeeper's namespace it does not know, and the other extensions' objects (name, JSON), which the
    form keeps as they are."""
    ours = data.get(NAMESPACE)
    unknown_keys = sorted(key for key in ours if key not in KNOWN_KEYS) if isinstance(ours, dict) else []
    others = [
        (name, json.dumps(value, ensure_ascii=False, indent=2))
        for name, value in sorted(data.items())
        if name != NAMESPACE
    ]
    return unknown_keys, others
