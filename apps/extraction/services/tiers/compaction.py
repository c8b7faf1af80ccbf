"""T1 compaction (docs/GLOSSARY.md): when the part of the chat not yet in the rolling summary passes `compaction_share`
of the chat model's context, the summary is extended — never rewritten — over the oldest of those messages, leaving the
newest half of the share to the chat itself. The model writes only the continuation; each extension is a new `summary`
memory that supersedes the previous one, so every earlier version stays (a rebuild goes back to one) and
`data.summary_end` is Smart Memory's summaryEnd."""

from __future__ import annotations

from apps.extraction.services import transcript
from apps.extraction.services.parsing.prose import parse_prose
from apps.extraction.services.tiers.base import JobContext, Work, decide, summary_memory
from apps.llm.client import UnreadableAnswer
from apps.llm.tokens import count_tokens
from apps.memories.models import Decision, Kind, Memory
from apps.memories.services.memories import memory_create, memory_supersede

RESPONSE_TOKENS = 700
SUMMARY_SHARE = 0.25  # of the prompt budget, for the summary so far (its end, when it is longer)


def due(*, chat_id: int, summary_end: int, count: int, context_tokens: int, share: float) -> bool:
    return transcript.tokens_between(chat_id=chat_id, start=summary_end, end=count) > share * context_tokens


def compaction_cut(lines: list[transcript.Line], *, keep_tokens: int) -> int:
    """How many of `lines` (oldest first) to summarise so that the rest fits in `keep_tokens`."""
    remaining = sum(line.tokens for line in lines)
    for position, line in enumerate(lines):
        if remaining <= keep_tokens:
            return position
        remaining -= line.tokens
    return len(lines)


def summary_tail(text: str, budget: int) -> str:
    """The end of a long summary: the model continues from where it stopped."""
    if count_tokens(text) <= budget:
        return text
    paragraphs = text.split("\n\n")
    kept: list[str] = []
    for paragraph in reversed(paragraphs):
        if kept and count_tokens("\n\n".join([paragraph, *kept])) > budget:
            break
        kept.insert(0, paragraph)
    return "(earlier parts of the summary omitted)\n\n" + "\n\n".join(kept)


def produce_compaction(ctx: JobContext) -> Work | None:
    start, count = ctx.through("compaction"), ctx.chat.message_count
    share, context_tokens = ctx.settings.compaction_share, ctx.settings.context_tokens
    if not due(chat_id=ctx.chat.pk, summary_end=start, count=count, context_tokens=context_tokens, share=share):
        return None
    pending = transcript.lines(chat_id=ctx.chat.pk, start=start, end=count)
    if not pending:  # only messages without text: nothing to summarise, the summary just covers them

        def cover() -> dict:
            ctx.set_through("compaction", count)
            return {"range": [start, count - 1], "empty": True}

        return Work(cover)
    cut = compaction_cut(pending, keep_tokens=int(share * context_tokens / 2))
    chunk = transcript.fit_oldest(pending[: max(cut, 1)], ctx.budget(response=RESPONSE_TOKENS, share=0.7))
    end = chunk[-1].index + 1 if chunk else count
    chunk = ctx.read(start, end)  # what the summary depends on: fingerprinted, then read again
    previous = summary_memory(ctx.chat)
    continuation, call = _ask_continuation(ctx, chunk, previous=previous, start=start, end=end)

    def write() -> dict:
        return _extend_summary(ctx, previous=previous, continuation=continuation, start=start, end=end, call=call)

    return Work(write, scopes=[ctx.chat_scope])


def _ask_continuation(
    ctx: JobContext, chunk: list[transcript.Line], *, previous: Memory | None, start: int, end: int
) -> tuple[str, int]:
    """The model's continuation of the summary over messages [start, end), shown the summary's end, and its call."""
    words = min(400, max(80, sum(line.tokens for line in chunk) // 8))
    completion = ctx.ask(
        "compaction",
        purpose="compaction",
        max_tokens=RESPONSE_TOKENS,
        summary=summary_tail(previous.content, ctx.budget(response=RESPONSE_TOKENS, share=SUMMARY_SHARE))
        if previous
        else "(none yet: this is the beginning of the story)",
        messages=transcript.render(chunk),
        first=f"#{chunk[0].index}" if chunk else f"#{start}",
        last=f"#{end - 1}",
        words=words,
    )
    continuation = parse_prose(completion.text, limit=6000)
    if not continuation:
        raise UnreadableAnswer("the model answered no summary text")
    return continuation, completion.call.pk


def _extend_summary(
    ctx: JobContext, *, previous: Memory | None, continuation: str, start: int, end: int, call: int
) -> dict:
    """The summary with the continuation appended, as a new `summary` memory that supersedes the previous one."""
    content = f"{previous.content}\n\n{continuation}" if previous else continuation
    parts = (previous.data_field("parts", int, 1) + 1) if previous else 1
    memory = memory_create(
        user=ctx.chat.user,
        kind=Kind.SUMMARY,
        content=content,
        chat=ctx.chat,
        importance=3,
        data={"summary_end": end, "parts": parts, "extended_from": start},
        origin="extraction",
    )
    if previous is not None:
        memory_supersede(old=previous, new=memory)
    decide(
        memory=memory,
        related=previous,
        outcome=Decision.Outcome.SUMMARISED,
        kind=Kind.SUMMARY,
        content=continuation,
        reason=f"rolling summary extended over messages #{start}–#{end - 1}",
        call=call,
    )
    ctx.set_through("compaction", end)
    return {"range": [start, end - 1], "summary_end": end, "words": len(continuation.split()), "parts": parts}
