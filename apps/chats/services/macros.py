"""The name macros of SillyTavern's cards and greetings: `{{char}}` and `{{user}}`, and TavernAI's older `<BOT>` and
`<USER>`, in any letter case, as SillyTavern's substituteParams replaces them."""

from __future__ import annotations

import re

_MACRO = re.compile(r"\{\{(char|user)\}\}|<(bot|user)>", re.IGNORECASE)


def macros_substitute(text: str, *, char: str, user: str) -> str:
    """`text` with the name macros replaced, in one pass: a name that itself reads `{{user}}` stays as it is."""
    if not text:
        return text

    def name(match: re.Match) -> str:
        which = (match.group(1) or match.group(2)).lower()
        return user if which == "user" else char

    return _MACRO.sub(name, text)
