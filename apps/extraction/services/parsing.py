"""Parsers of the tiers' answers, in Smart Memory's line formats (docs/GLOSSARY.md; each prompt under
apps/extraction/prompts/ states its own). They are lenient about what models do to a format (bullets, code fences,
stray spaces, case, a missing importance) and strict about meaning: a line that cannot be understood is returned in
`unparsed`, never guessed at, so the job can record it and the model test can show it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)])\s+")
_TAGGED = re.compile(r"^\[(?P<tag>[^\]]{1,200})\]\s*(?P<text>.*)$")
_NONE = re.compile(r"^(?:none|nothing|no (?:new )?(?:memories|items|changes))\W*$", re.IGNORECASE)
TEXT_CHARS = 2000
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
STATE_FIELDS = {
    "character": ("location", "injuries", "outfit_disguise", "mood", "active_goal", "carried_items"),
    "object": ("owner", "location", "condition", "status"),
    "place": ("occupants", "hazards", "political_control", "damage", "accessibility"),
    "faction": ("leadership", "objective", "alliances", "hostility_level"),
}
STATE_TYPES = {
    "character": "character",
    "person": "character",
    "npc": "character",
    "object": "object",
    "item": "object",
    "place": "place",
    "location": "place",
    "faction": "faction",
    "group": "faction",
    "organisation": "faction",
    "organization": "faction",
}
STATE_SYNONYMS = {
    "goal": "active_goal",
    "goals": "active_goal",
    "items": "carried_items",
    "inventory": "carried_items",
    "carrying": "carried_items",
    "outfit": "outfit_disguise",
    "disguise": "outfit_disguise",
    "clothing": "outfit_disguise",
    "injury": "injuries",
    "wounds": "injuries",
    "emotion": "mood",
    "leader": "leadership",
    "leaders": "leadership",
    "allies": "alliances",
    "hostility": "hostility_level",
    "control": "political_control",
    "access": "accessibility",
    "hazard": "hazards",
    "where": "location",
}
CLEARED = {"none", "nothing", "unknown", "n/a", "-", "—", "null", "empty"}
STANCES = ("knows", "suspects", "believes", "unaware", "hiding")


def answer_lines(text: str) -> list[str]:
    """The answer's lines without code fences, bullets and blank lines."""
    result = []
    for raw in text.splitlines():
        if _FENCE.match(raw):
            continue
        line = _BULLET.sub("", raw.strip(), count=1).strip()
        line = line.strip("*").strip()  # **bold** wrappers
        if line:
            result.append(line)
    return result


def is_none(lines: list[str]) -> bool:
    return len(lines) == 1 and bool(_NONE.match(lines[0]))


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


# --- memories: [kind:importance:scope(:entity=Name/type,...)] text ------------------------------------------------


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


@dataclass
class Parsed:
    items: list = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    empty: bool = False  # the model answered NONE


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
        if low.isdigit():
            line.importance = min(3, max(1, int(low)))
        elif low in IMPORTANCE_WORDS:
            line.importance = IMPORTANCE_WORDS[low]
        elif low in TIME_SCOPES:
            line.time_scope = low
    return line


_RELATION = re.compile(r"^(?P<a>[^:]+?)\s*(?:->|→|=>)\s*(?P<b>[^:]+?)\s*:\s*(?P<desc>.+)$")
_DESCRIPTOR = re.compile(r"^(?P<d>[^()]+?)\s*\((?P<m>[^)]+)\)$")


def parse_relationship(text: str) -> RelationshipLine | None:
    match = _RELATION.match(text.strip())
    if not match:
        return None
    descriptors = []
    for part in match["desc"].split(","):
        found = _DESCRIPTOR.match(part.strip())
        if not found:
            continue
        magnitude = MAGNITUDES.get(found["m"].strip().lower())
        descriptor = found["d"].strip().lower()
        if magnitude and descriptor and len(descriptor) <= 40:
            descriptors.append((descriptor, magnitude))
    if not descriptors:
        return None
    return RelationshipLine(match["a"].strip()[:100], match["b"].strip()[:100], descriptors[:MAX_DESCRIPTORS])


def parse_memories(text: str, kinds: tuple[str, ...], *, relationships: bool = False) -> Parsed:
    """Long-term or session lines; with `relationships`, also `[rel] A -> B: fond(high), …` lines."""
    lines = answer_lines(text)
    if is_none(lines):
        return Parsed(empty=True)
    parsed = Parsed()
    for line in lines:
        match = _TAGGED.match(line)
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
        memory.text = _clip(match["text"])
        parsed.items.append(memory)
    return parsed


# --- arcs: [arc] text, [arc:persistent] text, [resolved:N] text ------------------------------------------------------


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
        match = _TAGGED.match(line)
        body = _clip(match["text"]) if match else ""
        if not match or not body:
            parsed.unparsed.append(line)
            continue
        parts = [p.strip().lower() for p in match["tag"].split(":")]
        if parts[0] in ("arc", "open", "thread"):
            parsed.items.append(ArcLine("open", body, persistent="persistent" in parts[1:]))
        elif parts[0] in ("resolved", "resolve", "closed"):
            number = next((int(p) for p in parts[1:] if p.isdigit()), None)
            if number is None:
                found = re.match(r"^#?(\d{1,3})[.:)]?\s+(.+)$", body)
                number, body = (int(found[1]), found[2]) if found else (None, body)
            parsed.items.append(ArcLine("resolve", body, number=number))
        else:
            parsed.unparsed.append(line)
    return parsed


# --- epistemics: [knows] Char | fact, [hiding] A from B | fact -------------------------------------------------------


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
        match = _TAGGED.match(line)
        stance = match["tag"].strip().lower() if match else ""
        body = match["text"].strip() if match else ""
        separator = "|" if "|" in body else ":"
        who, _, fact = body.partition(separator)
        who, fact = who.strip(), _clip(fact.strip())
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


# --- state ledger: [state:Name:type] key=value | key=value -----------------------------------------------------------


@dataclass
class StateLine:
    entity: str
    type: str
    fields: dict[str, str]  # "" clears a field


def parse_state(text: str) -> Parsed:
    lines = answer_lines(text)
    if is_none(lines):
        return Parsed(empty=True)
    parsed = Parsed()
    for line in lines:
        match = _TAGGED.match(line)
        parts = [p.strip() for p in match["tag"].split(":")] if match else []
        if len(parts) < 2 or parts[0].lower() != "state" or not parts[1]:
            parsed.unparsed.append(line)
            continue
        kind = STATE_TYPES.get(parts[2].lower() if len(parts) > 2 else "character")
        if kind is None:
            parsed.unparsed.append(line)
            continue
        fields: dict[str, str] = {}
        for pair in match["text"].split("|"):
            key, equals, value = pair.partition("=")
            key = re.sub(r"[\s-]+", "_", key.strip().lower())
            key = STATE_SYNONYMS.get(key, key)
            if not equals or key not in STATE_FIELDS[kind]:
                continue
            value = _clip(value.strip())[:500]
            fields[key] = "" if value.lower() in CLEARED else value
        if not fields:
            parsed.unparsed.append(line)
            continue
        parsed.items.append(StateLine(parts[1][:100], kind, fields))
    return parsed


# --- profiles: <character_state>, <world_state>, <relationship_matrix> -----------------------------------------------

PROFILE_SECTIONS = ("character_state", "world_state", "relationship_matrix")
_CONFIDENCE = re.compile(r"\[\s*confidence\s*:\s*(?P<c>[01](?:\.\d+)?)\s*\]", re.IGNORECASE)


@dataclass
class ProfileSection:
    section: str
    text: str
    relationships: list[dict] = field(default_factory=list)


def parse_profiles(text: str) -> Parsed:
    parsed = Parsed()
    for section in PROFILE_SECTIONS:
        match = re.search(rf"<{section}>(?P<body>.*?)(?:</{section}>|(?=<[a-z_]+>)|\Z)", text, re.S | re.I)
        body = "\n".join(answer_lines(match["body"])) if match else ""
        if not body:
            parsed.unparsed.append(f"no <{section}> section")
            continue
        item = ProfileSection(section, body[:8000])
        if section == "relationship_matrix":
            for line in body.splitlines():
                found = _CONFIDENCE.search(line)
                pair = _RELATION.match(_CONFIDENCE.sub("", line).strip())
                if pair:
                    item.relationships.append(
                        {
                            "source": pair["a"].strip()[:100],
                            "target": pair["b"].strip()[:100],
                            "text": pair["desc"].strip()[:500],
                            "confidence": min(1.0, float(found["c"])) if found else None,
                        }
                    )
        parsed.items.append(item)
    return parsed


# --- yes/no, continuity, prose ---------------------------------------------------------------------------------------


def parse_yes_no(text: str) -> bool | None:
    words = re.findall(r"[a-z]+", text.lower())
    for word in words[:3]:
        if word in ("yes", "y", "true"):
            return True
        if word in ("no", "n", "false"):
            return False
    return None


@dataclass
class ContinuityVerdict:
    ok: bool
    findings: list[str]
    repair: str


def parse_continuity(text: str) -> ContinuityVerdict | None:
    lines = answer_lines(text)
    if not lines:
        return None
    if re.match(r"^(ok|consistent|no (contradictions?|issues?))\W*$", lines[0], re.I) and len(lines) == 1:
        return ContinuityVerdict(True, [], "")
    findings, repair = [], []
    for line in lines:
        match = _TAGGED.match(line)
        tag = match["tag"].strip().lower() if match else ""
        if tag in ("contradiction", "issue", "conflict") and match["text"].strip():
            findings.append(_clip(match["text"]))
        elif tag in ("repair", "fix", "note") and match["text"].strip():
            repair.append(_clip(match["text"]))
    if not findings:
        return ContinuityVerdict(True, [], "") if re.match(r"^ok\b", lines[0], re.I) else None
    return ContinuityVerdict(False, findings, " ".join(repair)[:1500])


_PREFIX = re.compile(r"^(?:summary|recap|scene recap|canon|continuation)\s*:\s*", re.I)


def parse_prose(text: str, *, limit: int = 20000) -> str:
    """A prose answer (summary, recap, canon): fences and a leading label removed, paragraphs kept."""
    kept = [line for line in text.strip().splitlines() if not _FENCE.match(line)]
    body = _PREFIX.sub("", "\n".join(kept).strip()).strip()
    return body[:limit]
