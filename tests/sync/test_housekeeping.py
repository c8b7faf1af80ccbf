from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chats.models import SeenGeneration
from apps.common.models import IdempotencyRecord
from apps.sync.services.housekeeping import sync_records_prune

pytestmark = pytest.mark.django_db


def test_old_retry_records_are_pruned_and_recent_ones_kept(user, chat):
    old, recent = timezone.now() - timedelta(days=40), timezone.now()
    for key, created in (("old", old), ("new", recent)):
        record = IdempotencyRecord.objects.create(user=user, key=key, fingerprint="f", status=200, body={})
        generation = SeenGeneration.objects.create(chat=chat, generation_id=key)
        IdempotencyRecord.objects.filter(pk=record.pk).update(created_at=created)
        SeenGeneration.objects.filter(pk=generation.pk).update(created_at=created)
    assert sync_records_prune() == {"idempotency_records": 1, "generation_ids": 1}
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["new"]
    assert list(SeenGeneration.objects.values_list("generation_id", flat=True)) == ["new"]
