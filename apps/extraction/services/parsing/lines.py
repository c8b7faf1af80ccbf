"""What every tier's answer shares: its lines without code fences, bullets and blank lines; the NONE answer; the
`[tag] text` shape; text clipped to size; and `Parsed`, what the line parsers return."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)])\s+")
TAGGED = re.compile(r"^\[(?P<tag>[^\]]{1,200})\]\s*(?P<text>.*)$")
_NONE = re.compile(r"^(?:none|nothing|no (?:new )?(?:memories|items|changes))\W*$", re.IGNORECASE)
TEXT_CHARS = 2000


def answer_lines(text: str) -> list[str]:
    """The answer's lines without code fences, bullets and blank lines."""
    result = []
    for raw in text.splitlines():
        if FENCE.match(raw):
            continue
        line = _BULLET.sub("", raw.strip(), count=1).strip()
        line = line.strip("*").strip()  # **bold** wrappers
        if line:
            result.append(line)
    return result


def is_none(lines: list[str]) -> bool:
    return len(lines) == 1 and bool(_NONE.match(lines[0]))


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


@dataclass
class Parsed:
    items: list = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    empty: bool = False  # the model answered NONE
