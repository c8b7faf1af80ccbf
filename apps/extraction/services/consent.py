"""Background work spends the person's model budget (money on a paid API, hours on a local model), so it runs only
as far as the person agreed:

- a connection is used for it only when the person ticked "Use for background memory work" (apps/llm/services.py);
- new messages, a few at a time, are extracted as they come;
- a chat's history, a backlog of more than `batch_max` messages (an import, a long chat whose extraction was off or
  had no model), waits for the person: `pipeline_run` (Run, with an estimate of the calls, tokens, time and cost
  beside it), or "extract automatically" for that chat or for the whole account;
- the account's daily token limit (apps/llm, `limit_reached`) pauses all background work until midnight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from apps.chats.models import Chat
from apps.extraction.models import ChatPipeline, ExtractionSettings, PipelineJob
from apps.extraction.services import transcript
from apps.extraction.services.jobs import pipeline_ensure, pipeline_wake
from apps.llm.models import Connection
from apps.llm.profiles import connection_context_size
from apps.llm.selectors import background_seconds_per_call

Tier = PipelineJob.Tier
T3 = (Tier.SESSION, Tier.LONGTERM, Tier.ARCS, Tier.LEDGER)
# The estimate's model of a pass (apps/extraction/services/tiers): instructions and lists around the messages, the
# answer, and the share of the window the messages of a T3 pass may take.
OVERHEAD, ANSWER, T3_SHARE = 1200, 450, 0.7
SCENE_MESSAGES = 25  # a scene's usual length, in messages; each scene is recapped and read for who knows what


def covered(pipeline: ChatPipeline) -> int:
    """Where the least advanced T3 tier stopped: memories were extracted from every message before it."""
    return min(int(pipeline.through.get(tier, 0)) for tier in T3)


def backlog(pipeline: ChatPipeline, count: int) -> int:
    """Messages memories were not yet extracted from."""
    return count - covered(pipeline)


def awaits_consent(pipeline: ChatPipeline, settings: ExtractionSettings, count: int) -> bool:
    """Does the chat's backlog wait for the person to run it? Not when either "extract automatically" is on, or
    when what is left is new messages (at most `batch_max`) or was agreed to with Run."""
    if settings.auto_extract or pipeline.auto_extract:
        return False
    ask_above = max(settings.batch_max, settings.batch_every)
    if backlog(pipeline, count) <= ask_above:
        return False
    return pipeline.approved_through is None or count - pipeline.approved_through > ask_above


@dataclass
class Estimate:
    messages: int
    calls: int
    prompt_tokens: int
    reply_tokens: int
    seconds: float | None  # at the connection's measured speed; None before it answered any background call
    cost: Decimal | None  # where the person entered the connection's prices


def estimate(*, chat: Chat, pipeline: ChatPipeline, settings: ExtractionSettings, connection: Connection) -> Estimate:
    """What extracting the chat's backlog will take, from its size and the tiers' prompts (bench/consent.py
    compares it with what a run then spends)."""
    count = chat.message_count
    start = count - backlog(pipeline, count)
    messages = count - start
    tokens = transcript.tokens_between(chat_id=chat.pk, start=start, end=count)
    window = connection_context_size(connection)
    fits = max(256, int((window - ANSWER - OVERHEAD) * T3_SHARE))
    passes = max(math.ceil(messages / max(settings.batch_max, 1)), math.ceil(tokens / fits)) if messages else 0
    calls = len(T3) * passes
    prompt = len(T3) * (tokens + passes * OVERHEAD)
    summary_end = int(pipeline.through.get("compaction", 0))
    unsummarised = transcript.tokens_between(chat_id=chat.pk, start=summary_end, end=count)
    keep = settings.compaction_share * settings.context_tokens / 2
    if unsummarised > settings.compaction_share * settings.context_tokens:
        chunks = math.ceil((unsummarised - keep) / max(256, int(fits * 0.7 / T3_SHARE)))
        calls += chunks
        prompt += int(unsummarised - keep) + chunks * OVERHEAD
    scenes = messages // SCENE_MESSAGES
    calls += 2 * scenes + (1 if messages else 0)  # recap and who-knows-what per scene; profiles once
    prompt += 2 * (tokens + scenes * OVERHEAD) + (min(tokens, fits) + OVERHEAD if messages else 0)
    reply = calls * ANSWER
    per_call = background_seconds_per_call(connection=connection)
    cost = None
    if connection.price_prompt is not None or connection.price_reply is not None:
        cost = (Decimal(prompt) * (connection.price_prompt or 0) + Decimal(reply) * (connection.price_reply or 0)) / (
            Decimal(1_000_000)
        )
    return Estimate(
        messages=messages,
        calls=calls,
        prompt_tokens=prompt,
        reply_tokens=reply,
        seconds=None if per_call is None else per_call * calls,
        cost=cost,
    )


@transaction.atomic
def pipeline_run(*, chat: Chat, automatic: bool | None = None) -> ChatPipeline:
    """The person agrees to extract the chat's history as it is now (Run); `automatic` also turns the chat's
    "extract automatically" on or off for what arrives later."""
    pipeline = pipeline_ensure(chat=chat)
    pipeline = ChatPipeline.objects.select_for_update().get(pk=pipeline.pk)
    fields = {"approved_through": Chat.objects.get(pk=chat.pk).message_count}
    if automatic is not None:
        fields["auto_extract"] = automatic
    ChatPipeline.objects.filter(pk=pipeline.pk).update(**fields)
    pipeline_wake(chat_id=chat.pk)
    pipeline.refresh_from_db()
    return pipeline
