"""T3 batch extraction of session memories (chat-scoped: scene, revelation, development, detail) and long-term
memories (persistent per character: fact, relationship, preference, event, and relationship history as descriptor
+ magnitude). Each pass covers the messages since the tier's last one (every `batch_every`, whole rounds in a group
chat), caps what it keeps per kind by hardware profile, and writes through the lifecycle: classification (dedup,
supersession, contradiction), a decay pass, consolidation counters."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from apps.chats.models import Character
from apps.extraction.services import transcript
from apps.extraction.services.parsing.lines import Parsed
from apps.extraction.services.parsing.memories import MemoryLine, RelationshipLine, parse_memories
from apps.extraction.services.tiers.base import (
    JobContext,
    Work,
    active,
    decide,
    listing,
    submit_by_owner,
)
from apps.llm.client import UnreadableAnswer
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle.decay import memories_pass_end
from apps.memories.services.lifecycle.judge import Candidate
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS
from apps.memories.services.memories import memory_create, memory_reconfirm, memory_supersede

CONTEXT_MESSAGES = 4
RESPONSE_TOKENS = 900
Outcome = Decision.Outcome


def t3_range(ctx: JobContext, tier: str) -> tuple[int, int]:
    """The messages a T3 pass covers: from where the tier stopped, at most `batch_max` of them."""
    start = ctx.through(tier)
    end = transcript.batch_end(chat_id=ctx.chat.pk, count=ctx.chat.message_count, group=len(ctx.characters) > 1)
    return start, min(end, start + ctx.settings.batch_max)


def read_batch(ctx: JobContext, tier: str, *, share: float = 0.75):
    """(start, end, context lines, new lines) for a T3 pass, the new lines fitted to the model's window: a pass
    that cannot take all of its range covers its beginning and leaves the rest to the next."""
    start, end = t3_range(ctx, tier)
    if end <= start:
        return start, end, [], []
    context = ctx.read(start - CONTEXT_MESSAGES, start)
    new = ctx.read(start, end)
    budget = ctx.budget(response=RESPONSE_TOKENS, share=share)
    fitted = transcript.fit_oldest(new, budget)
    if len(fitted) < len(new):
        end = fitted[-1].index + 1
    return start, end, transcript.fit_newest(context, budget // 6), fitted


def capped(items: list, cap: int) -> tuple[list, int]:
    """At most `cap` items of each kind, the most important first (ties: the order the model gave)."""
    by_kind: dict[str, list] = defaultdict(list)
    for position, item in enumerate(items):
        by_kind[getattr(item, "kind", "rel")].append((-getattr(item, "importance", 2), position, item))
    kept = sorted((entry for group in by_kind.values() for entry in sorted(group)[:cap]), key=lambda e: e[1])
    return [entry[2] for entry in kept], len(items) - len(kept)


def usable(parsed: Parsed, text: str) -> Parsed:
    if not parsed.items and not parsed.empty and (parsed.unparsed or not text.strip()):
        raise UnreadableAnswer(f"nothing in the answer could be read: {text[:200]!r}")
    return parsed


def candidate(item: MemoryLine, sources: list[int], *, default_scope: str, data: dict | None = None) -> Candidate:
    return Candidate(
        kind=item.kind,
        content=item.text,
        importance=item.importance,
        time_scope=item.time_scope or default_scope,
        source_message_indices=sources,
        entities=item.entities,
        data=data or {},
        origin="extraction",
    )


def seen_ids(results) -> list[int]:
    return [(r.memory or r.related).pk for r in results if (r.memory or r.related)]


def produce_session(ctx: JobContext) -> Work | None:
    start, end, context, new = read_batch(ctx, "session")
    if end <= start:
        return None
    parsed = Parsed(empty=True)
    if new:
        completion = ctx.ask(
            "session",
            purpose="session",
            max_tokens=RESPONSE_TOKENS,
            characters=ctx.speaker_names(),
            context=transcript.render(context) or "(the story begins here)",
            messages=transcript.render(new),
            first=f"#{start}",
            last=f"#{end - 1}",
            cap=ctx.cap,
        )
        parsed = usable(parse_memories(completion.text, SESSION_KINDS), completion.text)
    items, dropped = capped(parsed.items, ctx.cap)
    sources = [line.index for line in new]
    candidates = [candidate(item, sources, default_scope="session") for item in items]

    def write() -> dict:
        results = submit_by_owner(ctx, {None: candidates})[None]
        decay = memories_pass_end(scope=ctx.chat_scope, kinds=SESSION_KINDS, seen_ids=seen_ids(results))
        ctx.set_through("session", end)
        return {
            "range": [start, end - 1],
            "outcomes": dict(Counter(r.outcome for r in results)),
            "over_cap": dropped,
            "unparsed": parsed.unparsed[:20],
            "decay": decay,
        }

    return Work(write, scopes=[ctx.chat_scope])


def produce_longterm(ctx: JobContext) -> Work | None:
    start, end, context, new = read_batch(ctx, "longterm", share=0.6)
    if end <= start:
        return None
    parsed = Parsed(empty=True)
    if new:
        budget = ctx.budget(response=RESPONSE_TOKENS, share=0.2)
        completion = ctx.ask(
            "longterm",
            purpose="longterm",
            max_tokens=RESPONSE_TOKENS,
            characters=ctx.speaker_names(),
            known=listing(active(ctx, *LONG_TERM_KINDS)[:200], budget=budget),
            context=transcript.render(context) or "(the story begins here)",
            messages=transcript.render(new),
            first=f"#{start}",
            last=f"#{end - 1}",
            cap=ctx.cap,
        )
        parsed = usable(parse_memories(completion.text, LONG_TERM_KINDS, relationships=True), completion.text)
    items, dropped = capped(parsed.items, ctx.cap)
    sources = [line.index for line in new]
    by_owner: dict[int | None, list[Candidate]] = defaultdict(list)
    relations: list[RelationshipLine] = []
    for item in items:
        if isinstance(item, RelationshipLine):
            relations.append(item)
            continue
        owner = ctx.owner_of(*(e["name"] for e in item.entities), item.text)
        by_owner[owner.pk if owner else None].append(candidate(item, sources, default_scope="permanent"))

    def write() -> dict:
        outcomes: Counter = Counter()
        seen: dict[int | None, list[int]] = defaultdict(list)
        for owner_id, results in submit_by_owner(ctx, by_owner).items():
            outcomes.update(r.outcome for r in results)
            seen[owner_id] += seen_ids(results)
        for relation in relations:
            owner = ctx.owner_of(relation.source, relation.target)
            memory, outcome = relationship_record(ctx, relation, owner=owner, sources=sources)
            outcomes[outcome] += 1
            seen[owner.pk if owner else None].append(memory.pk)
        decay = {}
        for owner in ctx.characters or [None]:
            key = owner.pk if owner else None
            scope = ctx.character_scope(owner)
            decay[str(key or "chat")] = memories_pass_end(scope=scope, kinds=LONG_TERM_KINDS, seen_ids=seen[key])
        ctx.set_through("longterm", end)
        return {
            "range": [start, end - 1],
            "outcomes": dict(outcomes),
            "relationships": len(relations),
            "over_cap": dropped,
            "unparsed": parsed.unparsed[:20],
            "decay": decay,
        }

    return Work(write, scopes=[ctx.character_scope(c) for c in ctx.characters] or [ctx.chat_scope])


def _reading(descriptors: list) -> list[str]:
    """Descriptors in an order to compare them by: as JSON text, since a person may have stored any value."""
    return sorted(json.dumps(d, sort_keys=True) for d in descriptors)


def relationship_record(
    ctx: JobContext, relation: RelationshipLine, *, owner: Character | None, sources: list[int]
) -> tuple[Memory, str]:
    """Relationship history (as Smart Memory keeps it, docs/GLOSSARY.md): per ordered pair of characters, one active
    reading of descriptors and magnitudes; a different reading supersedes it, so the chain is the pair's history. The
    same reading again re-confirms it."""
    pair = [relation.source.lower(), relation.target.lower()]
    descriptors = [list(d) for d in relation.descriptors]
    current = _current_reading(ctx, owner=owner, pair=pair)
    call = ctx.calls[-1] if ctx.calls else None
    if current is not None and _reading(current.data_field("descriptors", list, [])) == _reading(descriptors):
        _reconfirm_reading(relation, current, sources=sources, call=call)
        return current, Outcome.REJECTED
    memory = _new_reading(ctx, relation, owner=owner, sources=sources, pair=pair, descriptors=descriptors)
    if current is None:
        decide(
            memory=memory,
            related=None,
            outcome=Outcome.PASSED,
            kind=Kind.RELATIONSHIP,
            content=relation.text,
            reason=f"first reading of how {relation.source} stands with {relation.target}",
            call=call,
        )
        return memory, Outcome.PASSED
    memory_supersede(old=current, new=memory)
    decide(
        memory=memory,
        related=current,
        outcome=Outcome.SUPERSEDED,
        kind=Kind.RELATIONSHIP,
        content=relation.text,
        reason=f"{relation.source} → {relation.target} changed (was: {current.content})",
        call=call,
    )
    return memory, Outcome.SUPERSEDED


def _current_reading(ctx: JobContext, *, owner: Character | None, pair: list[str]) -> Memory | None:
    """The pair's active reading in the owner's scope (the newest, should there be more than one)."""
    return (
        Memory.objects.filter(
            ctx.character_scope(owner).q(), kind=Kind.RELATIONSHIP, status=Status.ACTIVE, data__pair=pair
        )
        .defer("embedding")
        .order_by("-id")
        .first()
    )


def _reconfirm_reading(relation: RelationshipLine, current: Memory, *, sources: list[int], call: int | None) -> None:
    memory_reconfirm(memory=current, source_message_indices=sources)
    decide(
        memory=None,
        related=current,
        outcome=Outcome.REJECTED,
        kind=Kind.RELATIONSHIP,
        content=relation.text,
        reason=f"the same reading of {relation.source} → {relation.target} again: re-confirmed",
        call=call,
    )


def _new_reading(
    ctx: JobContext,
    relation: RelationshipLine,
    *,
    owner: Character | None,
    sources: list[int],
    pair: list[str],
    descriptors: list[list],
) -> Memory:
    """A `relationship` memory for the reading, persistent with the owner (or kept with the chat when there is none),
    marked as relationship history."""
    return memory_create(
        user=ctx.chat.user,
        kind=Kind.RELATIONSHIP,
        content=relation.text,
        character=owner,
        chat=None if owner else ctx.chat,
        source_chat=ctx.chat,
        source_message_indices=sources,
        entities=[{"name": relation.source, "type": "character"}, {"name": relation.target, "type": "character"}],
        data={"pair": pair, "descriptors": descriptors, "history": True},
        valid_from=min(sources) if sources else None,
        origin="extraction",
    )
