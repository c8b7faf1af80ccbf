"""Ids as clients and models write them: in URLs, query strings, forms, and the tags of a model's answer."""

from __future__ import annotations

import re

_ID = re.compile(r"[0-9]{1,18}")


def id_from(text: str) -> int | None:
    """The whole number `text` is when it is 1 to 18 ASCII digits, else None: a sign, a space, a "²" (a digit to
    str.isdigit, not to int()), or a longer number, past any id a 64-bit column holds and, past 4,300 digits, past
    what int() reads at all (it raises)."""
    return int(text) if _ID.fullmatch(text) else None
