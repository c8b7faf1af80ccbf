from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from apps.llm.models import Call


@shared_task(name="llm.prune_calls")
def prune_calls() -> int:
    cutoff = timezone.now() - timedelta(days=settings.LOREKEEPER_LLM["keep_calls_days"])
    deleted, _ = Call.objects.filter(created_at__lt=cutoff).delete()
    return deleted
