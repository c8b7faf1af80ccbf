"""Ids as clients write them: in URLs, query strings, forms and the cursors of lists."""

from __future__ import annotations

import re

_ID = re.compile(r"[0-9]{1,18}")


def id_from(text: str) -> int | None:
    """The whole number `text` is when it is 1 to 18 ASCII digits, else None: a sign, a space, a "²" (a digit to
    str.isdigit, not to int()), or a longer number (no id here nears 19 digits, and past 4,300 int() reads none at
    all: it raises)."""
    return int(text) if _ID.fullmatch(text) else None
