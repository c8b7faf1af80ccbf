"""What each slot holds (seed section 11): the memories of its tier for the chat — active ones only, retired
memories are never injected — in the order they deserve a place, fitted to the tier's budget, and rendered as a
headed block."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Q, QuerySet

from apps.chats.models import Character, Chat
from apps.extraction.models import ContinuityCheck
from apps.llm.tokens import count_tokens
from apps.memories.models import Kind, Memory, Status
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS

CANDIDATES = 120  # memories read per tier: more than any budget holds
PROFILE_ORDER = {"character_state": 0, "world_state": 1, "relationship_matrix": 2}


@dataclass
class Item:
    text: str
    memory_id: int | None = None
    kind: str = ""
    score: float | None = None

    @property
    def tokens(self) -> int:
        return count_tokens(self.text) + 1


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

    def visible(self) -> QuerySet[Memory]:
        """The chat's own memories and its characters' persistent ones, active only."""
        ids = [c.pk for c in self.characters]
        return (
            Memory.objects.filter(user_id=self.user_id, status=Status.ACTIVE)
            .filter(Q(chat_id=self.chat.pk) | Q(chat__isnull=True, character_id__in=ids))
            .defer("embedding")
        )


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


def _items(memories) -> list[Item]:
    return [Item(m.content, m.pk, m.kind) for m in memories]


def tier_sizes(scope: Scope) -> dict[str, int]:
    """Tokens each tier holds in all (its demand), in one grouped query over the chat's memories (estimated as the
    planner does: characters / 3.6)."""
    ids = [c.pk for c in scope.characters] or [0]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT m.kind, (m.data ? 'history') AS history, sum(ceil(char_length(m.content) / 3.6) + 3)
            FROM memories_memory m
            WHERE m.user_id = %s AND m.status = 'active' AND m.kind <> 'message'
              AND (m.chat_id = %s OR (m.chat_id IS NULL AND m.character_id = ANY(%s)))
            GROUP BY 1, 2
            """,
            [scope.user_id, scope.chat.pk, ids],
        )
        rows = cursor.fetchall()
    sizes: dict[str, int] = {}
    tiers = {
        Kind.SUMMARY: "short",
        Kind.SCENE_RECAP: "scenes",
        Kind.ARC: "arcs",
        Kind.CANON: "canon",
        Kind.PROFILE: "profiles",
        Kind.EPISTEMIC: "epistemic",
        Kind.STATE: "state_ledger",
    }
    for kind, history, tokens in rows:
        if kind == Kind.SUMMARY:
            tokens = 0  # versions are superseded, one is active: counted from the text below
        tier = (
            "relationships"
            if kind == Kind.RELATIONSHIP and history
            else "long"
            if kind in LONG_TERM_KINDS
            else "session"
            if kind in SESSION_KINDS
            else tiers.get(kind)
        )
        if tier:
            sizes[tier] = sizes.get(tier, 0) + int(tokens or 0)
    return sizes


def gather(scope: Scope) -> dict[str, list[Item] | str]:
    """Each tier's candidates, best first (the summary as its text)."""
    visible = scope.visible()
    chat_own = visible.filter(chat_id=scope.chat.pk)
    summary = chat_own.filter(kind=Kind.SUMMARY).order_by("-id").first()
    long = (
        visible.filter(kind__in=LONG_TERM_KINDS)
        .exclude(data__has_key="history")
        .order_by("-importance", "-confidence", "-updated_at", "-id")[:CANDIDATES]
    )
    arcs = sorted(
        visible.filter(kind=Kind.ARC).order_by("-updated_at", "-id")[:CANDIDATES],
        key=lambda m: 0 if m.data.get("status") != "resolved" else 1,  # open threads first, then settled ones
    )
    profiles = sorted(chat_own.filter(kind=Kind.PROFILE), key=lambda m: PROFILE_ORDER.get(m.data.get("section"), 9))
    epistemic = visible.filter(kind=Kind.EPISTEMIC)
    if scope.responder is not None:
        epistemic = epistemic.filter(data__holder__iexact=scope.responder.name)
    return {
        "short": summary.content if summary else "",
        "long": _items(long),
        "session": _items(chat_own.filter(kind__in=SESSION_KINDS).order_by("-created_at", "-id")[:CANDIDATES]),
        "scenes": _items(chat_own.filter(kind=Kind.SCENE_RECAP).order_by("-created_at", "-id")[:CANDIDATES]),
        "arcs": [
            Item(m.content if m.data.get("status") != "resolved" else f"(settled) {m.content}", m.pk, m.kind)
            for m in arcs
        ],
        "relationships": _items(
            visible.filter(kind=Kind.RELATIONSHIP, data__has_key="history").order_by("-updated_at", "-id")[:CANDIDATES]
        ),
        "profiles": [
            Item(f"{m.data.get('section', 'profile').replace('_', ' ').capitalize()}: {m.content}", m.pk, m.kind)
            for m in profiles
        ],
        "canon": _items(visible.filter(kind=Kind.CANON).order_by("-updated_at", "-id")[:5]),
        "epistemic": _items(epistemic.order_by("-updated_at", "-id")[:CANDIDATES]),
        "state_ledger": _items(
            chat_own.filter(kind=Kind.STATE).order_by("data__type", "data__key", "id")[:CANDIDATES]
        ),
    }


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
