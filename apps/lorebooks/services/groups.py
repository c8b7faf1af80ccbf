"""Inclusion groups (SillyTavern 1.19.0's `filterByInclusionGroups`): of the entries of one group that activate in
the same loop, one stays. A sticky member wins outright; members on cooldown or delay drop out; with group scoring,
only the members whose keys matched most stay; a group already activated in an earlier loop lets none in; then a
member with "prioritize" (`groupOverride`) wins by `order`, else one is drawn by `groupWeight`.

An entry may be in several groups, named comma-separated in `group`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from apps.lorebooks.services.fields import DEFAULT_WEIGHT, order_of

_SPLIT = re.compile(r",\s*")


def groups_filter(
    now: list[dict[str, Any]],
    activated: dict[str, dict[str, Any]],
    *,
    timed: Any,
    settings: Any,
    rng: Any,
    score: Callable[[dict[str, Any]], int],
) -> None:
    """Removes the losers of each inclusion group from `now`, in place. `score`: how many of an entry's keys the
    scanned text holds (for group scoring)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for entry in now:
        for name in (part for part in _SPLIT.split(entry.get("group") or "") if part):
            grouped.setdefault(name, []).append(entry)
    if not grouped:
        return

    def remove(entry: dict[str, Any]) -> None:
        # As SillyTavern's splice(indexOf(entry), 1): an entry no longer in the list removes the last one
        position = next((n for n, other in enumerate(now) if other is entry), -1)
        if now:
            now.pop(position)

    sticky_groups: set[str] = set()
    for name, group in grouped.items():
        sticky = [entry for entry in group if timed.is_active("sticky", entry)]
        if sticky:
            for entry in group:
                if not any(entry is other for other in sticky):
                    remove(entry)
            sticky_groups.add(name)
        for kind in ("cooldown", "delay"):
            for entry in [entry for entry in group if timed.is_active(kind, entry)]:
                remove(entry)
    for name, group in grouped.items():
        if name in sticky_groups or not (settings.use_group_scoring or any(e.get("useGroupScoring") for e in group)):
            continue
        scores = [score(entry) for entry in group]
        best = max(scores)
        for entry, score in list(zip(group, scores, strict=True)):
            scored = settings.use_group_scoring if entry.get("useGroupScoring") is None else entry["useGroupScoring"]
            if scored and score < best:
                remove(entry)
                group.remove(entry)
    for name, group in grouped.items():
        if name in sticky_groups:
            continue
        if any(entry.get("group") == name for entry in activated.values()):
            for entry in group:
                remove(entry)
            continue
        if len(group) <= 1:
            continue
        first = sorted((entry for entry in group if entry.get("groupOverride")), key=lambda entry: -order_of(entry))
        if first:
            winner = first[0]
        else:
            total = sum(_weight(entry) for entry in group)
            roll = rng.random() * total
            reached, winner = 0.0, None
            for entry in group:
                reached += _weight(entry)
                if roll <= reached:
                    winner = entry
                    break
            if winner is None:
                continue
        for entry in group:
            if entry is not winner:
                remove(entry)
        winner["why"] = dict(winner.get("why") or {}, group=name)


def _weight(entry: dict[str, Any]) -> float:
    weight = entry.get("groupWeight")
    return DEFAULT_WEIGHT if weight is None else weight
