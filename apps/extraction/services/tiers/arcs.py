"""T3 story arcs (docs/GLOSSARY.md): open threads over a 100-message sliding window, their resolution summaries, and
persistent arcs that span a character's chats. An open arc is an `arc` memory with data.status "open"; resolving
it supersedes it with the resolution (data.status "resolved"), which canon is later written from."""

from __future__ import annotations

from collections import Counter, defaultdict

from apps.extraction.models import ChatPipeline
from apps.extraction.services import transcript
from apps.extraction.services.parsing.arcs import ArcLine, parse_arcs
from apps.extraction.services.parsing.lines import Parsed
from apps.extraction.services.tiers.base import JobContext, Work, active, decide, submit_by_owner
from apps.extraction.services.tiers.memories import RESPONSE_TOKENS, capped, t3_range, usable
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle.judge import Candidate
from apps.memories.services.memories import memory_create, memory_supersede

WINDOW = 100
OPEN_LISTED = 30


def open_arcs(ctx: JobContext) -> list[Memory]:
    """This chat's open arcs and its characters' persistent ones, oldest first (numbered so in the prompt)."""
    arcs = active(ctx, Kind.ARC).filter(data__status="open").order_by("created_at", "id")
    return list(arcs[:OPEN_LISTED])


def produce_arcs(ctx: JobContext) -> Work | None:
    start, end = t3_range(ctx, "arcs")
    if end <= start:
        return None
    window = ctx.read(end - WINDOW, end)
    window = transcript.fit_newest(window, ctx.budget(response=RESPONSE_TOKENS, share=0.8))
    arcs = open_arcs(ctx)
    parsed = Parsed(empty=True)
    if any(line.index >= start for line in window):
        completion = ctx.ask(
            "arcs",
            purpose="arcs",
            max_tokens=RESPONSE_TOKENS,
            open="\n".join(f"[{i}] {arc.content}" for i, arc in enumerate(arcs, 1)) or "(none)",
            messages=transcript.render(window),
            first=f"#{window[0].index}",
            last=f"#{window[-1].index}",
            cap=ctx.cap,
        )
        parsed = usable(parse_arcs(completion.text), completion.text)
    opened, dropped = capped([item for item in parsed.items if item.action == "open"], ctx.cap)
    resolutions = [item for item in parsed.items if item.action == "resolve"]
    unparsed = list(parsed.unparsed)
    for item in resolutions:
        if item.number is None or not 1 <= item.number <= len(arcs):
            unparsed.append(f"[resolved:{item.number}] {item.text} (no such open arc)")
    sources = [line.index for line in window if line.index >= start]

    def write() -> dict:
        outcomes: Counter = Counter()
        groups: dict[int | None, list[Candidate]] = defaultdict(list)
        for item in opened:
            # A persistent arc belongs to the character it names (it spans that character's chats).
            owner = ctx.owner_of(item.text) if item.persistent else None
            groups[owner.pk if owner else None].append(_candidate(item, sources))
        for results in submit_by_owner(ctx, groups).values():
            outcomes.update(r.outcome for r in results)
        resolved = [
            _resolve(ctx, arcs[item.number - 1], item, sources) for item in resolutions if _numbered(item, arcs)
        ]
        if any(resolved):
            ChatPipeline.objects.filter(pk=ctx.pipeline.pk).update(canon_due=True)
        ctx.set_through("arcs", end)
        return {
            "range": [start, end - 1],
            "opened": dict(outcomes),
            "resolved": sum(1 for r in resolved if r),
            "over_cap": dropped,
            "unparsed": unparsed[:20],
        }

    scopes = [ctx.chat_scope, *(ctx.character_scope(c) for c in ctx.characters)]
    return Work(write, scopes=scopes)


def _numbered(item: ArcLine, arcs: list[Memory]) -> bool:
    return item.number is not None and 1 <= item.number <= len(arcs)


def _candidate(item: ArcLine, sources: list[int]) -> Candidate:
    return Candidate(
        kind=Kind.ARC,
        content=item.text,
        importance=3 if item.persistent else 2,
        time_scope="permanent" if item.persistent else "session",
        source_message_indices=sources,
        data={"status": "open", "persistent": item.persistent},
        origin="extraction",
    )


def _resolve(ctx: JobContext, arc: Memory, item: ArcLine, sources: list[int]) -> Memory | None:
    """The open arc is superseded by its resolution, unless something retired it while the model thought."""
    current = Memory.objects.select_for_update().defer("embedding").filter(pk=arc.pk, status=Status.ACTIVE).first()
    if current is None:
        return None
    resolution = memory_create(
        user=ctx.chat.user,
        kind=Kind.ARC,
        content=item.text,
        character=current.character if current.chat_id is None else None,
        chat=current.chat,
        importance=max(current.importance, 2),
        source_chat=ctx.chat,
        source_message_indices=sources,
        time_scope="permanent",
        data={"status": "resolved", "thread": current.content, "persistent": bool(current.data.get("persistent"))},
        valid_from=min(sources) if sources else None,
        origin="extraction",
    )
    memory_supersede(old=current, new=resolution)
    decide(
        memory=resolution,
        related=current,
        outcome=Decision.Outcome.SUPERSEDED,
        kind=Kind.ARC,
        content=item.text,
        reason=f"arc resolved: “{current.content}”",
        call=ctx.calls[-1] if ctx.calls else None,
    )
    return resolution
