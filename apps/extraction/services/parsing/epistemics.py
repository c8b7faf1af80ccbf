"""Epistemic lines, who knows what: `[knows] Char | fact`, `[hiding] A from B | fact`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.extraction.services.parsing.lines import TAGGED, Parsed, answer_lines, clip, is_none

STANCES = ("knows", "suspects", "believes", "unaware", "hiding")


@dataclass
class KnowledgeLine:
    stance: str
    holder: str
    fact: str
    target: str = ""

    @property
    def text(self) -> str:
        if self.stance == "hiding":
            return f"{self.holder} hides from {self.target}: {self.fact}"
        verb = {"knows": "knows", "suspects": "suspects", "believes": "wrongly believes", "unaware": "is unaware"}
        joiner = " that " if self.stance == "unaware" else ": "
        return f"{self.holder} {verb[self.stance]}{joiner}{self.fact}"


def parse_epistemics(text: str) -> Parsed:
    lines = answer_lines(text)
    if is_none(lines):
        return Parsed(empty=True)
    parsed = Parsed()
    for line in lines:
        match = TAGGED.match(line)
        stance = match["tag"].strip().lower() if match else ""
        body = match["text"].strip() if match else ""
        separator = "|" if "|" in body else ":"
        who, _, fact = body.partition(separator)
        who, fact = who.strip(), clip(fact.strip())
        if stance not in STANCES or not who or not fact:
            parsed.unparsed.append(line)
            continue
        target = ""
        if stance == "hiding":
            pair = re.split(r"\s+from\s+", who, maxsplit=1, flags=re.IGNORECASE)
            if len(pair) != 2 or not pair[0].strip() or not pair[1].strip():
                parsed.unparsed.append(line)
                continue
            who, target = pair[0].strip(), pair[1].strip()
        parsed.items.append(KnowledgeLine(stance, who[:100], fact, target[:100]))
    return parsed
