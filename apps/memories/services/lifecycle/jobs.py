"""Lifecycle jobs: a consolidation pass or a hierarchy run, queued, run by a worker, and left done or visibly
failed with the model's error (shown on the lifecycle page and in the API)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone

from apps.chats.models import Character
from apps.common.exceptions import ApplicationError
from apps.llm.client import LlmError
from apps.llm.selectors import NO_BACKGROUND_MODEL, connection_default
from apps.memories.models import LifecycleJob, LifecycleSettings
from apps.memories.services import queue
from apps.memories.services.lifecycle import periods
from apps.memories.services.lifecycle.consolidation import consolidation_run
from apps.memories.services.lifecycle.counters import pending_job
from apps.memories.services.lifecycle.hierarchy import hierarchy_plan, hierarchy_run
from apps.memories.services.lifecycle.scope import ScopeKey

log = logging.getLogger(__name__)
Job = LifecycleJob
PENDING = [Job.State.QUEUED, Job.State.RUNNING]


def _finish(job: Job, *, state: str, result: dict | None = None, error: str = "") -> None:
    Job.objects.filter(pk=job.pk).update(
        state=state, result=result or {}, error=error, finished_at=timezone.now(), progress=""
    )


def lifecycle_job_run(*, job_id: int) -> Job | None:
    """Run a queued job (a redelivered one that is already finished is left alone)."""
    claimed = Job.objects.filter(pk=job_id, state__in=PENDING).update(
        state=Job.State.RUNNING, started_at=timezone.now(), progress="running"
    )
    job = Job.objects.select_related("character", "chat").filter(pk=job_id).first()
    if not claimed or job is None:
        return job
    connection = connection_default(user_id=job.user_id)
    if connection is None:
        _finish(job, state=Job.State.FAILED, error=NO_BACKGROUND_MODEL + ".")
        return Job.objects.get(pk=job_id)
    try:
        if job.type == Job.Type.CONSOLIDATION:
            scope = ScopeKey(job.user_id, job.character_id, job.chat_id)
            result = consolidation_run(scope=scope, kind=job.params["kind"], connection=connection)
        else:
            force = None
            if job.params.get("granularity") and job.params.get("period"):
                force = periods.parse_key(job.params["granularity"], job.params["period"])
            result = {"built": hierarchy_run(character=job.character, connection=connection, force=force)}
    except LlmError as exc:
        error = exc.message + (f" (call #{exc.call.pk})" if exc.call else "")
        _finish(job, state=Job.State.FAILED, error=error)
        log.warning("lifecycle job %s failed: %s", job_id, error)
    else:
        _finish(job, state=Job.State.DONE, result=result)
    return Job.objects.get(pk=job_id)


def _enqueue(job: Job) -> None:
    transaction.on_commit(lambda: queue.enqueue_lifecycle_job(job.pk))


@transaction.atomic
def hierarchy_enqueue(
    *, user: AbstractUser, character: Character, granularity: str = "", period: str = "", manual: bool = False
) -> Job:
    """Queue a hierarchy run for a character (one pending run at a time: a second request joins it unless it
    names a period). `granularity`+`period` rebuild that period even if it is not due or already built."""
    if character.user_id != user.pk:
        raise ApplicationError("Unknown character.", {"field": "character"})
    if bool(granularity) != bool(period):
        raise ApplicationError("Give both granularity and period, or neither.", {"field": "period"})
    if granularity:
        if granularity not in periods.LEVELS:
            raise ApplicationError(f"granularity is one of {', '.join(periods.LEVELS)}.", {"field": "granularity"})
        try:
            period = periods.parse_key(granularity, period).key
        except ValueError as exc:
            raise ApplicationError(
                f"period of a {granularity} run looks like {periods.EXAMPLES[granularity]}.", {"field": "period"}
            ) from exc
    pending = pending_job(Job.objects.filter(user=user, character=character, type=Job.Type.HIERARCHY))
    if not granularity and pending is not None:
        return pending
    job = Job.objects.create(
        user=user,
        character=character,
        type=Job.Type.HIERARCHY,
        params={"granularity": granularity, "period": period, "manual": manual},
    )
    _enqueue(job)
    return job


def hierarchy_tick(*, now: datetime | None = None) -> int:
    """Queue a run for every character with due periods whose user has a model connection and the hierarchy on.
    The beat calls this every quarter hour, and the worker once at start (catch-up after downtime)."""
    now = now or timezone.now()
    off = set(LifecycleSettings.objects.filter(hierarchy_enabled=False).values_list("user_id", flat=True))
    characters = (
        Character.objects.filter(user__llm_connections__is_default=True)
        .exclude(user_id__in=off)
        .select_related("user")
    )
    queued = 0
    for character in characters:
        try:
            due = hierarchy_plan(character=character, now=now)
        except Exception:  # one character's data must not stop everyone's summaries
            log.exception("hierarchy_tick: the periods of character %s could not be planned", character.pk)
            continue
        if due:
            hierarchy_enqueue(user=character.user, character=character)
            queued += 1
    return queued
