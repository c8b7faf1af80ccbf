"""Per-kind consolidation counters: new entries of a kind in a scope since it was last consolidated. When one
reaches its kind's threshold the consolidation task is queued (once: not while a pass for it is pending)."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from apps.memories.models import ConsolidationCounter, LifecycleJob
from apps.memories.services import queue
from apps.memories.services.lifecycle.scope import ScopeKey, lifecycle_config

ABANDONED_AFTER = timedelta(hours=1)


def pending_job(jobs: QuerySet[LifecycleJob]) -> LifecycleJob | None:
    """The queued or running job among `jobs`, if any. One pending for over an hour was lost (a broker that
    dropped it, a worker killed past its time limit): it is marked failed, so that new work is queued again."""
    pending = jobs.filter(state__in=[LifecycleJob.State.QUEUED, LifecycleJob.State.RUNNING])
    pending.filter(created_at__lt=timezone.now() - ABANDONED_AFTER).update(
        state=LifecycleJob.State.FAILED,
        error="abandoned: no worker finished it within an hour",
        finished_at=timezone.now(),
    )
    return pending.first()


def consolidation_count(*, scope: ScopeKey, kind: str) -> int:
    counter, _ = ConsolidationCounter.objects.get_or_create(
        user_id=scope.user_id, character_id=scope.character_id, chat_id=scope.chat_id, kind=kind
    )
    ConsolidationCounter.objects.filter(pk=counter.pk).update(count=F("count") + 1)
    counter.refresh_from_db(fields=["count"])
    if counter.count >= lifecycle_config()["consolidation"]["thresholds"][kind]:
        consolidation_enqueue(scope=scope, kind=kind)
    return counter.count


def consolidation_enqueue(*, scope: ScopeKey, kind: str, manual: bool = False) -> LifecycleJob:
    pending = pending_job(
        LifecycleJob.objects.filter(
            user_id=scope.user_id,
            character_id=scope.character_id,
            chat_id=scope.chat_id,
            type=LifecycleJob.Type.CONSOLIDATION,
            params__kind=kind,
        )
    )
    if pending is not None:
        return pending
    job = LifecycleJob.objects.create(
        user_id=scope.user_id,
        character_id=scope.character_id,
        chat_id=scope.chat_id,
        type=LifecycleJob.Type.CONSOLIDATION,
        params={"kind": kind, "manual": manual},
    )
    transaction.on_commit(lambda: queue.enqueue_lifecycle_job(job.pk))
    return job
