"""Rebuild from a message (after a big edit, or automatically after an edit, swipe or deletion close to the end):
queued work is cancelled, what extraction made from that message on is rolled back (apps.extraction.services
.rollback), scenes that reach it are dropped, the summary goes back to the version that ended before it, and every
tier's coverage moves back so the planner extracts the rest again — batch extraction from the start of the batch
that held the message."""

from __future__ import annotations

from django.db.models import F, Q

from apps.extraction.models import ChatPipeline, ContinuityCheck, PipelineJob, Scene
from apps.extraction.services.batches import BATCH_TIERS, batch_start, batches_forget
from apps.extraction.services.jobs import jobs_cancel_pending
from apps.extraction.services.rollback import memories_rollback, summary_rollback
from apps.extraction.services.tiers.base import JobContext, Work
from apps.memories.models import Decision, Memory, Retired, Status


def produce_rebuild(ctx: JobContext) -> Work | None:
    index = int(ctx.job.params.get("from_index", 0))

    def write() -> dict:
        start = batch_start(ctx.chat.pk, index)
        cancelled = jobs_cancel_pending(
            chat_id=ctx.chat.pk,
            reason=f"replaced by the rebuild from #{index}",
            keep=Q(pk=ctx.job.pk) | Q(tier=PipelineJob.Tier.RECAP),
        )
        rolled = memories_rollback(chat=ctx.chat, from_index=start)
        batches_forget(chat_id=ctx.chat.pk, start=start)
        scenes = list(Scene.objects.filter(chat=ctx.chat, end_index__gt=index))
        recaps = [s.recap_memory_id for s in scenes if s.recap_memory_id]
        for memory in Memory.objects.filter(pk__in=recaps, status=Status.ACTIVE).defer("embedding"):
            Decision.objects.create(
                user_id=memory.user_id,
                memory=memory,
                outcome=Decision.Outcome.ROLLED_BACK,
                kind=memory.kind,
                content=memory.content,
                method="rebuild",
                reason=f"its scene reaches message #{index}, which changed",
            )
        Memory.objects.filter(pk__in=recaps, status=Status.ACTIVE).update(
            status=Status.RETIRED, retired_reason=Retired.ROLLED_BACK, version=F("version") + 1
        )
        Scene.objects.filter(pk__in=[s.pk for s in scenes]).delete()
        ContinuityCheck.objects.filter(chat=ctx.chat, message_index__gte=index).delete()
        summary_end = summary_rollback(chat=ctx.chat, to_index=index)
        kept = Scene.objects.filter(chat=ctx.chat).order_by("-end_index").values_list("end_index", flat=True).first()
        pipeline = ChatPipeline.objects.select_for_update().get(pk=ctx.pipeline.pk)
        through = dict(pipeline.through)
        for tier in BATCH_TIERS:
            through[tier] = min(int(through.get(tier, 0)), start)
        for tier in ("profiles", "continuity"):
            through[tier] = min(int(through.get(tier, 0)), index)
        through["scenes"] = min(int(through.get("scenes", 0)), kept or 0)
        through["compaction"] = summary_end
        pipeline.through = through
        if pipeline.stale_from is not None and pipeline.stale_from >= index:
            pipeline.stale_from = None
        pipeline.needs_plan = True
        pipeline.save(update_fields=["through", "stale_from", "needs_plan", "updated_at"])
        ctx.pipeline.through = through
        return {
            "from_index": index,
            "batch_start": start,
            "cancelled": cancelled,
            "scenes_dropped": len(scenes),
            "summary_end": summary_end,
            **rolled,
        }

    scopes = [ctx.chat_scope, *(ctx.character_scope(c) for c in ctx.characters)]
    return Work(write, scopes=scopes)
