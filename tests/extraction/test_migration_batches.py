"""The batches extracted (apps/extraction/migrations/0003) are read from the done jobs that were kept: a database
holding jobs migrates with every batch a rebuild could read before, and the jobs stay as they were."""

import pytest

from apps.chats.models import Chat
from apps.extraction.models import ExtractedBatch, PipelineJob
from apps.extraction.services.batches import batch_start
from tests.migrating import leaves, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("extraction", "0002_consent")]


def test_done_batch_jobs_become_the_batches_a_rebuild_reads(user):
    today = leaves()
    chat = Chat.objects.create(user=user, title="Kept")
    try:
        old = migrate(BEFORE).loader.project_state(BEFORE).apps
        Job = old.get_model("extraction", "PipelineJob")
        made = [
            ("session", "done", [0, 9]),
            ("session", "done", [10, 19]),
            ("longterm", "done", [0, 19]),
            ("arcs", "failed", [0, 19]),  # not done: it made nothing
            ("scenes", "done", [0, 19]),  # not a batch tier
            ("ledger", "done", "a range it never had"),
        ]
        for tier, state, result in made:
            Job.objects.create(user_id=user.pk, chat_id=chat.pk, tier=tier, state=state, result={"range": result})
        Job.objects.create(user_id=user.pk, chat_id=chat.pk, tier="rebuild", state="done", result={"batch_start": 4})
    finally:
        migrate(today)  # whatever failed, the next tests find today's schema

    batches = ExtractedBatch.objects.filter(chat=chat).values_list("tier", "start", "end")
    assert sorted(batches) == [("longterm", 0, 19), ("session", 0, 9), ("session", 10, 19)]
    assert PipelineJob.objects.filter(chat=chat).count() == 7
    assert (batch_start(chat.pk, 15), batch_start(chat.pk, 25)) == (0, 25)
