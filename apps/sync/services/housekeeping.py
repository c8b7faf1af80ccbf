from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.chats.models import SeenGeneration
from apps.common.models import IdempotencyRecord


@transaction.atomic
def sync_records_prune() -> dict[str, int]:
    now = timezone.now()
    keys, _ = IdempotencyRecord.objects.filter(
        created_at__lt=now - timedelta(hours=settings.LOREKEEPER_IDEMPOTENCY_TTL_HOURS)
    ).delete()
    generations, _ = SeenGeneration.objects.filter(
        created_at__lt=now - timedelta(days=settings.LOREKEEPER_GENERATION_ID_TTL_DAYS)
    ).delete()
    return {"idempotency_records": keys, "generation_ids": generations}
