"""The chat's runner: one at a time per chat (a local model cannot take parallel calls, and each tier reads what the
one before wrote), different chats in parallel on as many workers as there are.

`chat_run` holds a PostgreSQL advisory lock for the chat while it plans and runs the chat's due jobs, one by one,
re-planning after each. A second runner for the same chat finds the lock taken and leaves: the holder re-plans
after its current job, and after letting go of the lock it looks once more for a wake-up that came meanwhile, so
none is lost. A runner that dies releases the lock with its connection; the next one finds the job it left
"running" and queues it again.

A job's results are written in one transaction that first re-reads the fingerprint of the messages the job read,
under a share lock on the chat row (every chat write takes that row for update, so none can slip in between):
if they changed, or the chat is gone, the transaction is rolled back and the job discarded and queued again. The
job is marked done in the same transaction, so a redelivered task finds it done and writes nothing twice.
"""

from __future__ import annotations

import logging
import zlib
from contextlib import ExitStack, contextmanager
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection, transaction

from apps.chats.models import Chat
from apps.extraction.models import ChatPipeline, PipelineJob, Recap
from apps.extraction.services import jobs, transcript
from apps.extraction.services.batches import batch_record
from apps.extraction.services.pipeline import pipeline_plan
from apps.extraction.services.settings import extraction_settings_get
from apps.extraction.services.tiers import PRODUCERS, JobContext, Work
from apps.llm.client import LimitReached, LlmError
from apps.llm.selectors import NO_BACKGROUND_MODEL, connection_default, day_start
from apps.memories.services.lifecycle.scope import scope_locked

log = logging.getLogger(__name__)
_LOCK_CLASS = zlib.crc32(b"lorekeeper-extraction-chat") & 0x7FFFFFFF


class Stale(Exception):
    pass


def _lock_key(chat_id: int) -> int:
    return ((chat_id + 2**31) % 2**32) - 2**31


@contextmanager
def runner_lock(chat_id: int):
    """Yields whether this process holds the chat's runner lock (a session lock: it outlives transactions and
    goes with the connection if the process dies)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_CLASS, _lock_key(chat_id)])
        held = cursor.fetchone()[0]
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, _lock_key(chat_id)])


def runner_busy(chat_id: int) -> bool:
    """Is a runner (alive) working on this chat? Used by the sweep to tell orphaned jobs from running ones."""
    with runner_lock(chat_id) as held:
        return not held


def _wake_pending(chat_id: int) -> bool:
    """A wake-up that came after this runner's last plan (which cleared `needs_plan`), or a job due now."""
    pipeline = ChatPipeline.objects.filter(chat_id=chat_id).values("needs_plan", "paused").first()
    if pipeline is None:
        return False
    return (pipeline["needs_plan"] and not pipeline["paused"]) or jobs.job_next(
        chat_id=chat_id, paused=pipeline["paused"]
    ) is not None


def chat_run(*, chat_id: int, max_jobs: int | None = None) -> dict:
    """Plan and run the chat's due jobs until none is left, or `max_jobs` ran (then `more` says whether work is
    left: the task sends itself again, behind other chats' work, so a long backlog does not keep a worker from
    them). Answers what it did, and in how many seconds a job waiting out a backoff will be due."""
    ran: list[int] = []
    while True:
        with runner_lock(chat_id) as held:
            if not held:
                return {"ran": ran, "busy": True}
            jobs.jobs_recover(chat_id=chat_id)
            while max_jobs is None or len(ran) < max_jobs:
                pipeline = pipeline_plan(chat_id=chat_id)
                if pipeline is None:  # the chat is gone
                    return {"ran": ran}
                if pipeline.blocked:  # no model, or extraction off: the sweep comes back once it can run
                    return {"ran": ran, "blocked": True}
                job = jobs.job_next(chat_id=chat_id, paused=pipeline.paused)
                if job is None:
                    break
                job_execute(job_id=job.pk)
                ran.append(job.pk)
        if max_jobs is not None and len(ran) >= max_jobs:
            return {"ran": ran, "more": _wake_pending(chat_id)}
        if not _wake_pending(chat_id):
            break
    return {"ran": ran, "retry_in": jobs.retry_delay(chat_id=chat_id)}


def _context(job: PipelineJob) -> JobContext | str:
    chat = Chat.objects.filter(pk=job.chat_id).select_related("user").first()
    if chat is None:
        return "the chat was deleted"
    model = connection_default(user_id=job.user_id)
    if model is None:
        return NO_BACKGROUND_MODEL + ", then retry."
    pipeline = jobs.pipeline_ensure(chat=chat)
    return JobContext(
        job=job,
        chat=chat,
        pipeline=pipeline,
        settings=extraction_settings_get(user_id=job.user_id),
        connection=model,
        characters=list(chat.characters.order_by("id")),
    )


def job_execute(*, job_id: int) -> PipelineJob | None:
    """Run one queued job of the chat this runner holds (see the module's docstring)."""
    job = jobs.job_claim(job_id=job_id)
    if job is None:
        return None
    ctx = _context(job)
    if isinstance(ctx, str):
        jobs.job_failed(job=job, error=ctx, retry=False)
        _finally_failed(job, ctx)
        return PipelineJob.objects.filter(pk=job_id).first()
    try:
        work = PRODUCERS[job.tier](ctx)
        if work is None:
            jobs.job_done(job=job, result={"nothing_to_do": True}, ctx=ctx)
        else:
            if not ctx.still_current():
                raise Stale(_stale_reason(ctx))
            _write(ctx, work)
    except Stale as exc:
        jobs.job_discard(job=job, reason=str(exc), ctx=ctx, requeue=Chat.objects.filter(pk=job.chat_id).exists())
    except LimitReached as exc:  # before any call of this attempt, or between two: nothing of it is kept
        jobs.job_wait(job=job, until=day_start() + timedelta(days=1), reason=exc.message)
    except LlmError as exc:
        error = exc.message + (f" (call #{exc.call.pk})" if exc.call else "")
        jobs.job_failed(job=job, error=error, ctx=ctx)
        _finally_failed(job, error)
    except SoftTimeLimitExceeded:
        jobs.job_failed(job=job, error="stopped: it ran past the task's time limit", ctx=ctx)
        raise
    except Exception as exc:  # noqa: BLE001 — one tier's fault must not stop the chat's other work
        log.exception("extraction job %s (%s) failed", job.pk, job.tier)
        jobs.job_failed(job=job, error=f"internal error: {type(exc).__name__}: {exc}", ctx=ctx)
        _finally_failed(job, str(exc))
    return PipelineJob.objects.filter(pk=job_id).first()


def _write(ctx: JobContext, work: Work) -> None:
    with ExitStack() as stack:
        for scope in sorted(set(work.scopes), key=lambda s: (s.lock_id, s.user_id)):
            stack.enter_context(scope_locked(scope))  # in one order everywhere: no two runners deadlock
        with transaction.atomic():
            PipelineJob.objects.filter(pk=ctx.job.pk).update(progress="writing")
            result = work.write()
            _guard(ctx)
            jobs.job_done(job=ctx.job, result=result, ctx=ctx)
            batch_record(chat_id=ctx.chat.pk, tier=ctx.job.tier, result=result)


def _guard(ctx: JobContext) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM chats_chat WHERE id = %s FOR SHARE", [ctx.chat.pk])
        if cursor.fetchone() is None:
            raise Stale("the chat was deleted while it ran")
    if ctx.read_from is not None:
        now = transcript.fingerprint(chat_id=ctx.chat.pk, start=ctx.read_from, end=ctx.read_to)
        if now != ctx.fingerprint:
            raise Stale(_stale_reason(ctx))


def _stale_reason(ctx: JobContext) -> str:
    if ctx.read_from is None:
        return "the chat was deleted while it ran"
    return (
        f"messages #{ctx.read_from}–#{max(ctx.read_from, ctx.read_to - 1)} were edited, swiped or deleted while it "
        "ran: its results were discarded and it was queued again"
    )


def _finally_failed(job: PipelineJob, error: str) -> None:
    """A recap whose job gave up says so (the panel shows it instead of waiting forever)."""
    current = PipelineJob.objects.filter(pk=job.pk).values_list("state", flat=True).first()
    if job.tier == PipelineJob.Tier.RECAP and current == PipelineJob.State.FAILED:
        Recap.objects.filter(pk=job.params.get("recap"), state=Recap.State.PENDING).update(
            state=Recap.State.FAILED, error=error[:1000]
        )
