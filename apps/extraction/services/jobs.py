"""Job records of the pipeline: queued in PostgreSQL (the durable outbox: a lost broker message only delays a job,
the sweep finds it), claimed by the chat's runner, and finished as done, failed (after retries with backoff),
discarded (the messages it read changed meanwhile: queued again for the new state) or cancelled."""

from __future__ import annotations

import random
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.chats.models import Chat
from apps.common.tasks import on_commit_once
from apps.extraction.models import ChatPipeline, PipelineJob
from apps.extraction.services import queue

Job = PipelineJob
Tier = PipelineJob.Tier
PENDING = [Job.State.QUEUED, Job.State.RUNNING]
RETRYABLE = [Job.State.FAILED, Job.State.DISCARDED, Job.State.CANCELLED]
# Lower runs first: a rebuild before anything; what a person waits for (recap, continuity's repair note) next; then
# the tiers in order, T1 to T4 (docs/GLOSSARY.md), with scenes after batch extraction (a scene's recap links to
# what was extracted).
ORDER = [
    Tier.REBUILD,
    Tier.RECAP,
    Tier.CONTINUITY,
    Tier.COMPACTION,
    Tier.SESSION,
    Tier.LONGTERM,
    Tier.ARCS,
    Tier.LEDGER,
    Tier.SCENES,
    Tier.EPISTEMIC,
    Tier.PROFILES,
    Tier.CANON,
]
PRIORITY = {tier: position for position, tier in enumerate(ORDER)}
MAX_DISCARDS = 5


def config() -> dict:
    return settings.LOREKEEPER_EXTRACTION


def wake(*, chat_id: int) -> None:
    """Ask for the chat's runner once the current transaction commits. The durable half of the wake-up is
    `needs_plan` (or a queued job); this is the hint."""
    on_commit_once(queue.enqueue_run, chat_id)


def pipeline_wake(*, chat_id: int) -> None:
    """The chat changed: plan it (durably: `needs_plan` survives a lost broker message; the sweep finds it)."""
    if not ChatPipeline.objects.filter(chat_id=chat_id).update(needs_plan=True):
        chat = Chat.objects.filter(pk=chat_id).first()
        if chat is None:
            return
        ChatPipeline.objects.get_or_create(chat=chat, defaults={"user_id": chat.user_id, "needs_plan": True})
    wake(chat_id=chat_id)


def pipelines_wake(*, user_id: int) -> int:
    """Plan every chat of the user again (the sweep does, within a minute): a setting that lets work go on
    changed."""
    return ChatPipeline.objects.filter(user_id=user_id).update(needs_plan=True)


def pipeline_ensure(*, chat: Chat) -> ChatPipeline:
    pipeline, _ = ChatPipeline.objects.get_or_create(chat=chat, defaults={"user_id": chat.user_id})
    return pipeline


def job_queue(*, chat: Chat, tier: str, params: dict | None = None, manual: bool = False) -> Job:
    """A new job; the caller's transaction commits it (the runner is woken on commit)."""
    job = Job.objects.create(
        user_id=chat.user_id, chat=chat, tier=tier, priority=PRIORITY[tier], params=params or {}, manual=manual
    )
    wake(chat_id=chat.pk)
    return job


def job_claim(*, job_id: int) -> Job | None:
    """The queued job, now running; None when it is not queued any more (done by a runner before a crash, say)."""
    claimed = Job.objects.filter(pk=job_id, state=Job.State.QUEUED).update(
        state=Job.State.RUNNING,
        started_at=timezone.now(),
        attempts=F("attempts") + 1,
        progress="started",
        next_attempt_at=None,
    )
    return Job.objects.get(pk=job_id) if claimed else None


def _record(ctx) -> dict:
    if ctx is None:
        return {}
    return {
        "read_from": ctx.read_from,
        "read_to": ctx.read_to,
        "fingerprint": ctx.fingerprint[:50],
        "llm_calls": ctx.calls,
    }


def job_done(*, job: Job, result: dict, ctx=None) -> None:
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.DONE, result=result, error="", progress="", finished_at=timezone.now(), **_record(ctx)
    )


def job_discard(*, job: Job, reason: str, ctx=None, requeue: bool = True) -> Job | None:
    """The messages the job read changed while it ran: nothing of it was kept; the tier is queued again for the
    chat as it is now (as Smart Memory aborts on a swipe or chat switch). A tier discarded MAX_DISCARDS times in a
    row (a chat edited faster than the model answers) waits for the next write instead."""
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.DISCARDED, error=reason, progress="", finished_at=timezone.now(), **_record(ctx)
    )
    chat = Chat.objects.filter(pk=job.chat_id).first()
    discards = int(job.params.get("discards", 0)) + 1
    if not requeue or chat is None or discards >= MAX_DISCARDS:
        return None
    return job_queue(chat=chat, tier=job.tier, params={**job.params, "discards": discards}, manual=job.manual)


def job_wait(*, job: Job, until, reason: str) -> None:
    """Back in the queue until `until`, the attempt it made not counted (the daily token limit refused it)."""
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.QUEUED, next_attempt_at=until, attempts=F("attempts") - 1, error=reason, progress="waiting"
    )


def backoff(attempt: int) -> float:
    base = config()["retry_backoff"] * 2 ** max(0, attempt - 1)
    return min(base, config()["retry_backoff_max"]) * random.uniform(0.75, 1.0)


def job_failed(*, job: Job, error: str, ctx=None, retry: bool = True) -> None:
    """Try again after a backoff while attempts remain; then failed, visibly, until a person retries it."""
    job = Job.objects.filter(pk=job.pk).first()
    if job is None:  # its chat was deleted meanwhile, and the job with it
        return
    if retry and job.attempts < config()["max_attempts"]:
        Job.objects.filter(pk=job.pk).update(
            state=Job.State.QUEUED,
            next_attempt_at=timezone.now() + timedelta(seconds=backoff(job.attempts)),
            error=f"attempt {job.attempts} failed: {error}",
            progress="waiting to retry",
            **_record(ctx),
        )
        return
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.FAILED, error=error, progress="", finished_at=timezone.now(), **_record(ctx)
    )


@transaction.atomic
def job_retry(*, job: Job) -> Job:
    """A failed job (or one cancelled or discarded) queued again by a person, with fresh attempts; any other job
    is answered as it is."""
    Job.objects.filter(pk=job.pk, state__in=RETRYABLE).update(
        state=Job.State.QUEUED, attempts=0, next_attempt_at=None, error="", progress="", manual=True, finished_at=None
    )
    wake(chat_id=job.chat_id)
    return Job.objects.get(pk=job.pk)


def jobs_cancel_pending(*, chat_id: int, reason: str, keep: Q | None = None) -> int:
    queued = Job.objects.filter(chat_id=chat_id, state=Job.State.QUEUED)
    if keep is not None:
        queued = queued.exclude(keep)
    return queued.update(state=Job.State.CANCELLED, error=reason, finished_at=timezone.now(), progress="")


def jobs_recover(*, chat_id: int) -> int:
    """Jobs left running by a runner that died (its lock went with its connection): queued again, the attempt
    counted; past the attempts, failed."""
    orphans = Job.objects.filter(chat_id=chat_id, state=Job.State.RUNNING)
    failed = orphans.filter(attempts__gte=config()["max_attempts"]).update(
        state=Job.State.FAILED,
        error="interrupted every time: the worker stopped while running it",
        finished_at=timezone.now(),
        progress="",
    )
    requeued = orphans.update(
        state=Job.State.QUEUED, error="interrupted: the worker stopped while running it", progress="queued again"
    )
    return failed + requeued


def job_next(*, chat_id: int, paused: bool) -> Job | None:
    due = Job.objects.filter(chat_id=chat_id, state=Job.State.QUEUED).filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=timezone.now())
    )
    if paused:
        due = due.filter(manual=True)  # a paused pipeline still does what a person asks for
    return due.order_by("priority", "created_at", "id").first()


def retry_delay(*, chat_id: int) -> float | None:
    """Seconds until the chat's earliest job waiting out a backoff may run."""
    waiting = (
        Job.objects.filter(chat_id=chat_id, state=Job.State.QUEUED, next_attempt_at__gt=timezone.now())
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )
    return None if waiting is None else max(0.0, (waiting - timezone.now()).total_seconds())


def jobs_prune(*, days: int | None = None) -> int:
    """Forget finished jobs older than `days` (LOREKEEPER_EXTRACTION["keep_jobs_days"]); failed ones stay until a
    person retries them (their tier is stopped), as does each chat's newest job of every tier."""
    days = config()["keep_jobs_days"] if days is None else days
    newest = Job.objects.order_by("chat_id", "tier", "-created_at", "-id").distinct("chat_id", "tier").values("pk")
    old = Job.objects.filter(
        state__in=[Job.State.DONE, Job.State.DISCARDED, Job.State.CANCELLED],
        created_at__lt=timezone.now() - timedelta(days=days),
    ).exclude(pk__in=newest)
    return old.delete()[0]
