"""What each slot holds (docs/GLOSSARY.md): the memories of its tier for the chat — active ones only, retired
memories are never injected — in the order they deserve a place, fitted to the tier's budget, and rendered as a
headed block."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import connection

from apps.chats.models import Character, Chat
from apps.common.exceptions import ApplicationError
from apps.extraction.models import ContinuityCheck
from apps.llm.tokens import count_tokens
from apps.memories.models import Kind
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS

CANDIDATES = 120  # memories read per tier: more than any budget holds
PROFILE_ORDER = {"character_state": 0, "world_state": 1, "relationship_matrix": 2}


@dataclass
class Item:
    text: str
    memory_id: int | None = None
    kind: str = ""
    score: float | None = None
    tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = count_tokens(self.text) + 1


@dataclass
class Filled:
    """A tier's content fitted to its budget: what went in (in display order) and what it would take for all."""

    items: list[Item] = field(default_factory=list)
    injected: int = 0
    full: int = 0

    @property
    def memory_ids(self) -> list[int]:
        return [item.memory_id for item in self.items if item.memory_id is not None]


@dataclass
class Scope:
    user_id: int
    chat: Chat
    characters: list[Character]
    responder: Character | None


def responder_of(chat: Chat, characters: list[Character], character: Character | str | None) -> Character | None:
    """Whose knowledge the epistemic slot holds: the character named, else the chat's only one, else the one who
    spoke last."""
    if isinstance(character, Character):
        return character
    if isinstance(character, str) and character.strip():
        found = next((c for c in characters if c.name.lower() == character.strip().lower()), None)
        if found is None:
            raise ApplicationError("That character does not take part in this chat.", {"field": "character"})
        return found
    if len(characters) <= 1:
        return characters[0] if characters else None
    last = chat.messages.filter(is_user=False, is_system=False).order_by("-index").values_list("name", flat=True)
    name = (last.first() or "").lower()
    return next((c for c in characters if c.name.lower() == name), characters[0])


def fit(items: list[Item], budget: int, *, full: int | None = None, chronological: bool = False) -> Filled:
    """Items in priority order, each taken while it fits (a long one that does not is skipped for shorter ones).
    `full`: the tier's whole size (estimated in the database) when it holds more than was read."""
    filled = Filled(full=max(full or 0, sum(item.tokens for item in items)))
    for item in items:
        if filled.injected + item.tokens <= budget:
            filled.items.append(item)
            filled.injected += item.tokens
    if chronological:
        filled.items.reverse()
    return filled


def fit_text_end(text: str, budget: int) -> Filled:
    """A prose block (the summary) kept whole, or its end: what the story came to matters most."""
    if not text.strip():
        return Filled()
    full = count_tokens(text) + 1
    if full <= budget:
        return Filled([Item(text)], full, full)
    paragraphs = text.split("\n\n")
    kept: list[str] = []
    for paragraph in reversed(paragraphs):
        if count_tokens("\n\n".join([paragraph, *kept])) + 8 > budget:
            break
        kept.insert(0, paragraph)
    if not kept:
        return Filled([], 0, full)
    body = "(…)\n\n" + "\n\n".join(kept)
    return Filled([Item(body)], count_tokens(body) + 1, full)


def _limit(budget: int) -> int:
    """Memories worth reading for a budget: no item is under about 6 tokens."""
    return max(5, min(CANDIDATES, budget // 6 + 5))


@dataclass
class Gathered:
    """Each tier's candidates best first (the summary as its text), and what each tier holds in all (tokens,
    estimated from bytes)."""

    tiers: dict[str, list[Item] | str]
    sizes: dict[str, int]


_VISIBLE = (
    "m.user_id = %(user)s AND m.status = 'active'"
    " AND (m.chat_id = %(chat)s OR (m.chat_id IS NULL AND m.character_id = ANY(%(characters)s)))"
)
_OWN = "m.user_id = %(user)s AND m.status = 'active' AND m.chat_id = %(chat)s"
_HISTORY = "(m.kind = 'relationship' AND m.data ? 'history')"  # a relationship's history: its own tier
_RECENT = "m.updated_at DESC, m.id DESC"
_NEWEST = "m.created_at DESC, m.id DESC"
_LONG_ORDER = f"m.importance DESC, m.confidence DESC, {_RECENT}"

# tier: (scope, which memories, best first). The long-term tier is read from the scope's pass below.
_TIER_SQL = {
    "short": (_OWN, "m.kind = 'summary'", "m.id DESC"),
    "session": (_OWN, "m.kind = ANY(%(session)s)", _NEWEST),
    "scenes": (_OWN, "m.kind = 'scene_recap'", _NEWEST),
    "arcs": (_VISIBLE, "m.kind = 'arc'", f"(m.data ->> 'status') = 'resolved', {_RECENT}"),  # open threads first
    "relationships": (_VISIBLE, _HISTORY, _RECENT),
    "profiles": (_OWN, "m.kind = 'profile'", _RECENT),
    "canon": (_VISIBLE, "m.kind = 'canon'", _RECENT),
    "epistemic": (
        _VISIBLE,
        "m.kind = 'epistemic' AND (%(responder)s::text IS NULL"
        " OR lower(m.data ->> 'holder') = lower(%(responder)s::text))",
        _RECENT,
    ),
    "state_ledger": (_OWN, "m.kind = 'state'", "m.data ->> 'type', m.data ->> 'key', m.id"),
}

# One round trip. The scope is read once, narrow (no content, no vector), for what each kind holds and for the
# long-term tier's best (the tier that is most of the scope); every other tier is its own small top-N through the
# indexes. Rows: (id, kind, content, data, tier, rank) for candidates; (None, kind, None, None, None, None,
# history, count, tokens) for the sizes.
_SCOPE_COLUMNS = (
    f"m.id, m.kind, {_HISTORY} AS history, m.importance, m.confidence, m.updated_at, octet_length(m.content) AS bytes"
)
# The visible scope without the message layer, as two branches the indexes answer exactly: the chat's memories by
# (chat, status, kind), its characters' by character. As one OR the planner may scan every chat's rows, or fetch
# the chat's messages (most of its rows) only to drop them.
_GATHER_SQL = (
    f"""
WITH scope AS MATERIALIZED (
    SELECT {_SCOPE_COLUMNS} FROM memories_memory m
    WHERE m.chat_id = %(chat)s AND m.status = 'active' AND m.kind = ANY(%(kept)s) AND m.user_id = %(user)s
    UNION ALL
    SELECT {_SCOPE_COLUMNS} FROM memories_memory m
    WHERE m.chat_id IS NULL AND m.character_id = ANY(%(characters)s) AND m.status = 'active'
      AND m.kind = ANY(%(kept)s) AND m.user_id = %(user)s
), long AS (
    SELECT m.id, row_number() OVER (ORDER BY {_LONG_ORDER}) AS rank
    FROM scope m WHERE m.kind = ANY(%(long)s) AND NOT m.history
    ORDER BY {_LONG_ORDER} LIMIT %(limit_long)s
)
SELECT m.id, m.kind, m.content, m.data, 'long', long.rank, NULL::boolean, NULL::bigint, NULL::bigint
FROM long JOIN memories_memory m ON m.id = long.id
"""
    + "".join(
        f"""UNION ALL
SELECT * FROM (
    SELECT m.id, m.kind, m.content, m.data, '{tier}', row_number() OVER (ORDER BY {order}),
           NULL::boolean, NULL::bigint, NULL::bigint
    FROM memories_memory m WHERE {scope} AND {which} ORDER BY {order} LIMIT %(limit_{tier})s
) {tier}
"""
        for tier, (scope, which, order) in _TIER_SQL.items()
    )
    + """UNION ALL
SELECT NULL, s.kind, NULL, NULL, NULL, NULL, s.history, count(*), sum(s.bytes / 4 + 3)
FROM scope s GROUP BY s.kind, s.history
ORDER BY 5, 6
"""
)


def _tier_of(kind: str, history: bool) -> str | None:
    if history:
        return "relationships"
    if kind in LONG_TERM_KINDS:
        return "long"
    if kind in SESSION_KINDS:
        return "session"
    return _KIND_TIERS.get(kind)


_KIND_TIERS = {
    "scene_recap": "scenes",
    "arc": "arcs",
    "canon": "canon",
    "profile": "profiles",
    "epistemic": "epistemic",
    "state": "state_ledger",
}


def gather(scope: Scope, budgets: dict[str, int]) -> Gathered:
    """All the tiers' candidates, each as many as its budget could hold, and what each tier holds in all: one
    query, not one per tier (the context is built before every generation); retired memories never.

    The sizes are read over the visible scope; a tier read only from the chat's own memories (session, scenes,
    profiles, state) or only the responder's beliefs (epistemic) may count a few more than it could show."""
    limits = {tier: _limit(budget) for tier, budget in budgets.items()} | {"short": 1, "canon": 5, "profiles": 10}
    params = {
        "user": scope.user_id,
        "chat": scope.chat.pk,
        "characters": [c.pk for c in scope.characters] or [0],
        "responder": scope.responder.name if scope.responder else None,
        "long": list(LONG_TERM_KINDS),
        "session": list(SESSION_KINDS),
        "kept": [kind for kind in Kind.values if kind != Kind.MESSAGE],
    } | {f"limit_{tier}": limits.get(tier, CANDIDATES) for tier in (*_TIER_SQL, "long")}
    with connection.cursor() as cursor:
        cursor.execute(_GATHER_SQL, params)
        rows = cursor.fetchall()
    tiers: dict[str, list[Item] | str] = {tier: [] for tier in (*_TIER_SQL, "long")} | {"short": ""}
    profiles: list[tuple[int, Item]] = []
    sizes: dict[str, int] = {}
    for pk, kind, content, data, tier, _rank, history, _count, tokens in rows:
        if tier is None:  # what the scope holds of a kind
            if size_tier := _tier_of(kind, history):
                sizes[size_tier] = sizes.get(size_tier, 0) + int(tokens or 0)
            continue
        data = data if isinstance(data, dict) else json.loads(data or "{}")
        if tier == "short":
            tiers["short"] = content
        elif tier == "arcs" and data.get("status") == "resolved":
            tiers[tier].append(Item(f"(settled) {content}", pk, kind))
        elif tier == "profiles":
            section = str(data.get("section", "profile"))
            label = section.replace("_", " ").capitalize()
            profiles.append((PROFILE_ORDER.get(section, 9), Item(f"{label}: {content}", pk, kind)))
        else:
            tiers[tier].append(Item(content, pk, kind))
    tiers["profiles"] = [item for _, item in sorted(profiles, key=lambda pair: pair[0])]
    return Gathered(tiers, sizes)


def repair_note(chat: Chat) -> ContinuityCheck | None:
    """The newest continuity repair note not yet used (one-shot: the build that injects it consumes it)."""
    return (
        ContinuityCheck.objects.filter(chat=chat, repair_consumed_at__isnull=True)
        .exclude(repair_note="")
        .order_by("-created_at", "-id")
        .first()
    )


def render(label: str, filled: Filled, *, prose: bool = False) -> str:
    if not filled.items:
        return ""
    body = "\n\n".join(i.text for i in filled.items) if prose else "\n".join(f"- {i.text}" for i in filled.items)
    return f"[{label}]\n{body}"
