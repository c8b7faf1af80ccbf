"""The sweep (every minute, beat): whatever a lost wake-up left behind is found in PostgreSQL and its chat's
runner asked for again — pipelines waiting to be planned, queued jobs no runner took (a broker that was down when
they were queued), and jobs left running by a worker that died (their runner lock is free)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from apps.extraction.models import ChatPipeline, PipelineJob
from apps.extraction.services.runner import runner_busy

LIMIT = 500
QUEUED_GRACE = timedelta(seconds=30)
RUNNING_GRACE = timedelta(seconds=60)


def chats_to_run(*, now=None) -> list[int]:
    now = now or timezone.now()
    planning = (
        ChatPipeline.objects.filter(needs_plan=True, paused=False, user__llm_connections__is_default=True)
        .exclude(user__extraction_settings__enabled=False)
        .values_list("chat_id", flat=True)[:LIMIT]
    )
    waiting = (
        PipelineJob.objects.filter(state=PipelineJob.State.QUEUED, created_at__lt=now - QUEUED_GRACE)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .filter(Q(chat__pipeline__paused=False) | Q(manual=True))
        .values_list("chat_id", flat=True)
        .distinct()[:LIMIT]
    )
    running = (
        PipelineJob.objects.filter(state=PipelineJob.State.RUNNING, started_at__lt=now - RUNNING_GRACE)
        .values_list("chat_id", flat=True)
        .distinct()[:LIMIT]
    )
    orphaned = [chat_id for chat_id in running if not runner_busy(chat_id)]
    return sorted({*planning, *waiting, *orphaned})
