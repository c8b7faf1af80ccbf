"""Arc lines: `[arc] text`, `[arc:persistent] text`, `[resolved:N] text`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.extraction.services.parsing.lines import TAGGED, Parsed, answer_lines, clip, is_none


@dataclass
class ArcLine:
    action: str  # "open" or "resolve"
    text: str
    persistent: bool = False
    number: int | None = None  # of the open arc resolved, as numbered in the prompt


def parse_arcs(text: str) -> Parsed:
    lines = answer_lines(text)
    if is_none(lines):
        return Parsed(empty=True)
    parsed = Parsed()
    for line in lines:
        match = TAGGED.match(line)
        body = clip(match["text"]) if match else ""
        if not match or not body:
            parsed.unparsed.append(line)
            continue
        parts = [p.strip().lower() for p in match["tag"].split(":")]
        if parts[0] in ("arc", "open", "thread"):
            parsed.items.append(ArcLine("open", body, persistent="persistent" in parts[1:]))
        elif parts[0] in ("resolved", "resolve", "closed"):
            number = next((int(p) for p in parts[1:] if p.isascii() and p.isdigit()), None)
            if number is None:
                found = re.match(r"^#?(\d{1,3})[.:)]?\s+(.+)$", body)
                number, body = (int(found[1]), found[2]) if found else (None, body)
            parsed.items.append(ArcLine("resolve", body, number=number))
        else:
            parsed.unparsed.append(line)
    return parsed
