"""State ledger lines: `[state:Name:type] key=value | key=value` (a cleared value empties the field)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.extraction.services.parsing.lines import TAGGED, Parsed, answer_lines, clip, is_none

STATE_FIELDS = {
    "character": ("location", "injuries", "outfit_disguise", "mood", "active_goal", "carried_items"),
    "object": ("owner", "location", "condition", "status"),
    "place": ("occupants", "hazards", "political_control", "damage", "accessibility"),
    "faction": ("leadership", "objective", "alliances", "hostility_level"),
}
STATE_TYPES = {
    "character": "character",
    "person": "character",
    "npc": "character",
    "object": "object",
    "item": "object",
    "place": "place",
    "location": "place",
    "faction": "faction",
    "group": "faction",
    "organisation": "faction",
    "organization": "faction",
}
STATE_SYNONYMS = {
    "goal": "active_goal",
    "goals": "active_goal",
    "items": "carried_items",
    "inventory": "carried_items",
    "carrying": "carried_items",
    "outfit": "outfit_disguise",
    "disguise": "outfit_disguise",
    "clothing": "outfit_disguise",
    "injury": "injuries",
    "wounds": "injuries",
    "emotion": "mood",
    "leader": "leadership",
    "leaders": "leadership",
    "allies": "alliances",
    "hostility": "hostility_level",
    "control": "political_control",
    "access": "accessibility",
    "hazard": "hazards",
    "where": "location",
}
CLEARED = {"none", "nothing", "unknown", "n/a", "-", "—", "null", "empty"}


@dataclass
class StateLine:
    entity: str
    type: str
    fields: dict[str, str]  # "" clears a field


def parse_state(text: str) -> Parsed:
    lines = answer_lines(text)
    if is_none(lines):
        return Parsed(empty=True)
    parsed = Parsed()
    for line in lines:
        match = TAGGED.match(line)
        parts = [p.strip() for p in match["tag"].split(":")] if match else []
        if len(parts) < 2 or parts[0].lower() != "state" or not parts[1]:
            parsed.unparsed.append(line)
            continue
        kind = STATE_TYPES.get(parts[2].lower() if len(parts) > 2 else "character")
        if kind is None:
            parsed.unparsed.append(line)
            continue
        fields: dict[str, str] = {}
        for pair in match["text"].split("|"):
            key, equals, value = pair.partition("=")
            key = re.sub(r"[\s-]+", "_", key.strip().lower())
            key = STATE_SYNONYMS.get(key, key)
            if not equals or key not in STATE_FIELDS[kind]:
                continue
            value = clip(value.strip())[:500]
            fields[key] = "" if value.lower() in CLEARED else value
        if not fields:
            parsed.unparsed.append(line)
            continue
        parsed.items.append(StateLine(parts[1][:100], kind, fields))
    return parsed
