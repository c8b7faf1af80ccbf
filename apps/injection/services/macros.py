"""The 11 `{{smartmemory-*}}` macros (docs/GLOSSARY.md, slot): 10 per tier and `{{smartmemory-unified}}`.
Auto-detection scans the characters' card fields for them and activates only the ones found; force mode activates all
(for macros placed in instruct templates, which are not scanned)."""

from __future__ import annotations

import re

from apps.chats.models import Character
from apps.injection.services.settings import MACRO_SLOTS

CARD_FIELDS = ("system_prompt", "description", "personality", "scenario", "mes_example")
_TOKEN = re.compile(r"\{\{\s*smartmemory-([a-z_-]+)\s*\}\}", re.IGNORECASE)


def macros_in(text: str) -> set[str]:
    """Slot names whose macro the text holds."""
    found = {match.lower().replace("-", "_") for match in _TOKEN.findall(text or "")}
    return found & set(MACRO_SLOTS)


def detected_macros(characters: list[Character]) -> set[str]:
    found: set[str] = set()
    for character in characters:
        for name in CARD_FIELDS:
            found |= macros_in(getattr(character, name, "") or "")
    return found
