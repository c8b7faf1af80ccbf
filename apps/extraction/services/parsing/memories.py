"""Memory lines, `[kind:importance:scope(:entity=Name/type,...)] text`, and relationship lines,
`[rel] A -> B: fond(high), …`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.extraction.services.parsing.lines import TAGGED, Parsed, answer_lines, clip, is_none

IMPORTANCE_WORDS = {"low": 1, "minor": 1, "medium": 2, "moderate": 2, "high": 3, "major": 3, "critical": 3}
TIME_SCOPES = ("scene", "session", "permanent")
MAGNITUDES = {
    "low": "low",
    "mild": "low",
    "slight": "low",
    "weak": "low",
    "medium": "medium",
    "moderate": "medium",
    "mid": "medium",
    "high": "high",
    "strong": "high",
    "intense": "high",
    "very high": "high",
    "extreme": "high",
}
MAX_DESCRIPTORS = 6


@dataclass
class MemoryLine:
    kind: str
    text: str
    importance: int = 2
    time_scope: str = ""
    entities: list[dict] = field(default_factory=list)


@dataclass
class RelationshipLine:
    source: str
    target: str
    descriptors: list[tuple[str, str]]  # (descriptor, magnitude)

    @property
    def text(self) -> str:
        listed = ", ".join(f"{d} ({m})" for d, m in self.descriptors)
        return f"{self.source} → {self.target}: {listed}"


def _entities(value: str) -> list[dict]:
    entities = []
    for part in value.split(","):
        name, _, kind = part.strip().partition("/")
        name = name.strip().strip("\"'")
        if name:
            entities.append({"name": name[:200], "type": kind.strip().lower()[:50]})
    return entities


def parse_memory_tag(tag: str, kinds: tuple[str, ...]) -> MemoryLine | None:
    parts = [p.strip() for p in tag.split(":")]
    kind = parts[0].lower()
    if kind not in kinds:
        return None
    line = MemoryLine(kind=kind, text="")
    rest = parts[1:]
    for i, part in enumerate(rest):
        low = part.lower()
        if low.startswith(("entity=", "entities=")):
            # Entity lists may hold a ':' of their own: the rest of the tag belongs to them.
            line.entities = _entities(":".join(rest[i:]).split("=", 1)[1])
            break
        if low.isascii() and low.isdigit():  # "²" is a digit to isdigit, not to int()
            line.importance = min(3, max(1, int(low)))
        elif low in IMPORTANCE_WORDS:
            line.importance = IMPORTANCE_WORDS[low]
        elif low in TIME_SCOPES:
            line.time_scope = low
    return line


_ARROW = re.compile(r"->|→|=>")


# The two readers below take a model's answer apart with string methods: the patterns they replace had lazy parts
# each followed by optional spaces, and tried every split of a run of spaces or arrows (an answer line of 5,000
# characters took a second, a longer one minutes of a shared worker).
def relation_split(text: str) -> tuple[str, str, str] | None:
    """ "A -> B: description" (or →, =>) as (A, B, description), each stripped, else None. A holds no colon, B
    none either (the first colon after the arrow ends it), the description is one line."""
    text = text.strip()
    arrow = _ARROW.search(text, 1)  # A is at least a character
    if arrow is None or ":" in text[: arrow.start()]:
        return None
    b, colon, desc = text[arrow.end() :].partition(":")
    a, b, desc = text[: arrow.start()].strip(), b.strip(), desc.strip()
    return (a, b, desc) if a and b and colon and desc and "\n" not in desc else None


def _descriptor(part: str) -> tuple[str, str] | None:
    """ "warm (moderate)" as ("warm", "moderate"), else None."""
    part = part.strip()
    word, opened, magnitude = part.partition("(")
    if not opened or not part.endswith(")") or ")" in word or ")" in magnitude[:-1]:
        return None
    word, magnitude = word.strip(), magnitude[:-1]
    return (word, magnitude) if word and magnitude else None


def parse_relationship(text: str) -> RelationshipLine | None:
    split = relation_split(text)
    if split is None:
        return None
    descriptors = []
    for part in split[2].split(","):
        found = _descriptor(part)
        if not found:
            continue
        magnitude = MAGNITUDES.get(found[1].strip().lower())
        descriptor = found[0].lower()
        if magnitude and descriptor and len(descriptor) <= 40:
            descriptors.append((descriptor, magnitude))
    if not descriptors:
        return None
    return RelationshipLine(split[0][:100], split[1][:100], descriptors[:MAX_DESCRIPTORS])


def parse_memories(text: str, kinds: tuple[str, ...], *, relationships: bool = False) -> Parsed:
    """Long-term or session lines; with `relationships`, also `[rel] A -> B: fond(high), …` lines."""
    lines = answer_lines(text)
    if is_none(lines):
        return Parsed(empty=True)
    parsed = Parsed()
    for line in lines:
        match = TAGGED.match(line)
        if not match or not match["text"].strip():
            parsed.unparsed.append(line)
            continue
        tag = match["tag"].strip()
        if relationships and tag.lower() in ("rel", "relation", "relationship_state", "bond"):
            relation = parse_relationship(match["text"])
            (parsed.items.append(relation) if relation else parsed.unparsed.append(line))
            continue
        memory = parse_memory_tag(tag, kinds)
        if memory is None:
            parsed.unparsed.append(line)
            continue
        memory.text = clip(match["text"])
        parsed.items.append(memory)
    return parsed
