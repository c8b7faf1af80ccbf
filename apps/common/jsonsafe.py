"""What PostgreSQL can store: jsonb and text reject NUL characters, and UTF-8 cannot carry lone surrogates."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

# Only a line whose raw text contains one of these escapes can decode to an unstorable value.
_SUSPECT_ESCAPE = re.compile(r"\\u0000|\\u[dD][89a-fA-F]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large to store")
    return value


def loads_strict(text: str) -> Any:
    """json.loads that refuses NaN/Infinity and numbers beyond a float's range (jsonb cannot store them)."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)


def json_bytes(value: Any) -> bytes:
    """`value` as JSON in UTF-8, for a request body: orjson's encoding (a thirtieth of the standard library's time on
    a long history), or the standard library's where orjson refuses a value (an integer past 64 bits, a string with
    a lone surrogate, which it writes as an escape)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()


def unstorable_reason(value: Any, raw: str | None = None) -> str | None:
    """Why `value` cannot be stored, or None. Pass the raw JSON text to skip the walk for ordinary input."""
    if raw is not None and not _SUSPECT_ESCAPE.search(raw) and "\x00" not in raw:
        return None
    for text in _strings(value):
        if "\x00" in text:
            return "contains a NUL character (\\u0000), which cannot be stored"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains an unpaired UTF-16 surrogate, which is not valid Unicode"
    return None


def _strings(value: Any):
    """Every string in a JSON value, keys included (iteratively: a deep value must not hit the recursion limit)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
