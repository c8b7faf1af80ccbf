"""T3 state ledger (docs/GLOSSARY.md): the current state of the story's characters, objects, places and factions, per
chat (chatMetadata in Smart Memory, not persistent). One active `state` memory per entity holds its fields; a pass that
changes any of them supersedes it with the merged state, so the chain is the entity's history."""

from __future__ import annotations

from collections import Counter

from apps.extraction.services import transcript
from apps.extraction.services.parsing.lines import Parsed
from apps.extraction.services.parsing.state import STATE_FIELDS, StateLine, parse_state
from apps.extraction.services.tiers.base import JobContext, Work, decide
from apps.extraction.services.tiers.memories import RESPONSE_TOKENS, read_batch, usable
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.memories import memory_create, memory_reconfirm, memory_supersede

Outcome = Decision.Outcome


def ledger(chat_id: int) -> list[Memory]:
    return list(
        Memory.objects.filter(chat_id=chat_id, kind=Kind.STATE, status=Status.ACTIVE)
        .defer("embedding")
        .order_by("data__type", "data__entity", "id")
    )


def render_state(entity: str, kind: str, fields: dict[str, str]) -> str:
    listed = "; ".join(f"{key}={fields[key]}" for key in STATE_FIELDS[kind] if fields.get(key))
    return f"{entity} ({kind}): {listed}"


def render_ledger(memories: list[Memory]) -> str:
    lines = []
    for memory in memories:
        listed = " | ".join(f"{k}={v}" for k, v in memory.data_field("fields", dict, {}).items() if v)
        entity, kind = memory.data_field("entity", str, "?"), memory.data_field("type", str, "character")
        lines.append(f"[state:{entity}:{kind}] {listed}")
    return "\n".join(lines) or "(empty)"


def produce_ledger(ctx: JobContext) -> Work | None:
    start, end, _context, new = read_batch(ctx, "ledger")
    if end <= start:
        return None
    parsed = Parsed(empty=True)
    if new:
        completion = ctx.ask(
            "state_ledger",
            purpose="ledger",
            max_tokens=RESPONSE_TOKENS,
            ledger=render_ledger(ledger(ctx.chat.pk)),
            messages=transcript.render(new),
            first=f"#{start}",
            last=f"#{end - 1}",
        )
        parsed = usable(parse_state(completion.text), completion.text)
    sources = [line.index for line in new]

    def write() -> dict:
        outcomes = Counter(state_record(ctx, item, sources=sources) for item in parsed.items)
        ctx.set_through("ledger", end)
        return {"range": [start, end - 1], "entities": dict(outcomes), "unparsed": parsed.unparsed[:20]}

    return Work(write, scopes=[ctx.chat_scope])


def state_record(ctx: JobContext, item: StateLine, *, sources: list[int]) -> str:
    """Merge one entity's changed fields into its state: superseded when anything changed, re-confirmed when the
    pass only repeated it."""
    key = item.entity.lower()
    current = next(
        (m for m in ledger(ctx.chat.pk) if m.data.get("key") == key and m.data.get("type") == item.type), None
    )
    before = dict(current.data_field("fields", dict, {})) if current else {}
    fields = {k: v for k, v in {**before, **item.fields}.items() if v}
    call = ctx.calls[-1] if ctx.calls else None
    if current is not None and fields == before:
        memory_reconfirm(memory=current, source_message_indices=sources)
        return "unchanged"
    content = render_state(item.entity, item.type, fields) if fields else f"{item.entity} ({item.type}): —"
    memory = memory_create(
        user=ctx.chat.user,
        kind=Kind.STATE,
        content=content,
        chat=ctx.chat,
        source_message_indices=sources,
        entities=[{"name": item.entity, "type": item.type}],
        data={"entity": item.entity, "key": key, "type": item.type, "fields": fields},
        valid_from=min(sources) if sources else None,
        origin="extraction",
    )
    if current is None:
        decide(
            memory=memory,
            related=None,
            outcome=Outcome.PASSED,
            kind=Kind.STATE,
            content=content,
            reason=f"state of {item.entity} first recorded",
            call=call,
        )
        return "new"
    memory_supersede(old=current, new=memory)
    changed = sorted(k for k in set(before) | set(fields) if before.get(k) != fields.get(k))
    decide(
        memory=memory,
        related=current,
        outcome=Outcome.SUPERSEDED,
        kind=Kind.STATE,
        content=content,
        reason=f"state of {item.entity} changed: {', '.join(changed)}",
        call=call,
    )
    return "changed"
