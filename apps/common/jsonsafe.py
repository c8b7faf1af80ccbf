"""What PostgreSQL can store: jsonb and text reject NUL characters, and UTF-8 cannot carry lone surrogates."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

# Only a line whose raw text contains one of these escapes can decode to an unstorable value.
_SUSPECT_ESCAPE = re.compile(r"\\u0000|\\u[dD][89a-fA-F]")


# What UTF-8 cannot carry: a UTF-16 surrogate alone (JSON's escapes can write one, as a client that cut an emoji's
# pair in two does), and NUL, which PostgreSQL's text refuses.
_UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")


def text_storable(text: str) -> bool:
    """Whether a string can be stored and encoded: no NUL, no lone surrogate (ASCII text is known at once)."""
    return text.isascii() and "\x00" not in text or _UNSTORABLE_CHARS.search(text) is None


def text_stored(text: str) -> str:
    """The string without what could not be stored (NUL characters and lone surrogates)."""
    return text if text_storable(text) else _UNSTORABLE_CHARS.sub("", text)


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


def json_problem(error: ValueError | RecursionError, *, line: bool = True) -> str:
    """What `loads_strict` found wrong, for a person: where the text stopped being JSON (its line, unless the text
    is one line of a file that names it already), or which value a store cannot hold."""
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at " + (f"line {error.lineno}, " if line else "") + f"column {error.colno}"
    return str(error)


def json_bytes(value: Any) -> bytes:
    """`value` as JSON in UTF-8, for a request body: orjson's encoding (a thirtieth of the standard library's time on
    a long history), or the standard library's where orjson refuses a value (an integer past 64 bits, a string with
    a lone surrogate, which it writes as an escape)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()


# Objects and arrays within one another that a stored value may hold. SillyTavern's own data nests a dozen deep.
# Python's JSON parser and encoder follow each level on the interpreter's stack (about a thousand frames, less the
# depth of their caller): a value nested several hundred deep passed the request's parser, then failed with a server
# error where it was encoded or read back from deeper down, such as the database driver's encoder under the ASGI
# server.
MAX_DEPTH = 100
TOO_DEEP = f"nests objects or arrays more than {MAX_DEPTH} deep, which cannot be stored"


def unstorable_reason(value: Any, raw: str | None = None) -> str | None:
    """Why `value` cannot be stored, or None. Pass the raw JSON text to skip the walk for ordinary input."""
    if (
        raw is not None
        and not _SUSPECT_ESCAPE.search(raw)
        and "\x00" not in raw
        and raw.count("[") + raw.count("{") <= MAX_DEPTH  # no more brackets than that: no deeper
    ):
        return None
    # Level by level, iteratively: a deep value must not hit the recursion limit here either.
    level: list[Any] = [value]
    for depth in range(MAX_DEPTH + 1):
        deeper: list[Any] = []
        for item in level:
            if isinstance(item, str):
                if "\x00" in item:
                    return "contains a NUL character (\\u0000), which cannot be stored"
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return "contains an unpaired UTF-16 surrogate, which is not valid Unicode"
            elif isinstance(item, dict | list) and depth == MAX_DEPTH:
                return TOO_DEEP
            elif isinstance(item, dict):
                deeper += item.keys()
                deeper += item.values()
            elif isinstance(item, list):
                deeper += item
        if not deeper:
            break
        level = deeper
    return None
