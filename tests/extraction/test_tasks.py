"""The pipeline in a real Celery worker (a separate process, a real broker, the scripted model over HTTP): appends
through the API are extracted in the background; an edit while a job runs discards its results. (A worker killed
mid-job: tests/faults/test_worker.py.)"""

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.extraction.models import ChatPipeline, PipelineJob, Scene
from apps.extraction.services.settings import extraction_settings_set
from apps.memories.models import Memory
from tests.extraction.helpers import LONG, TASKS, append, turns
from tests.llm_server import Reply
from tests.worker import celery_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def through(chat, tier: str) -> int:
    pipeline = ChatPipeline.objects.filter(chat=chat).first()
    return int(pipeline.through.get(tier, 0)) if pipeline else 0


def test_appends_through_the_api_are_extracted_by_a_real_worker(api, user, character, worker_model, broker):
    extraction_settings_set(user=user, data={"context_tokens": 1024, "compaction_share": 0.5, "profile_every": 500})
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")

    def text(i):
        return f"The next morning the fog lay on the docks.{LONG}" if i == 12 else f"Turn {i}.{LONG}"

    for first in (0, 8, 16):
        append(api, chat, turns(first, 8, text=text))
    # The requests answered; nothing ran yet: no worker has taken the queued work.
    assert not PipelineJob.objects.exists() and not Memory.objects.filter(user=user).exists()

    with celery_worker(broker) as worker:
        wait_for(
            lambda: (
                all(through(chat, t) == 24 for t in ("session", "longterm", "arcs", "ledger"))
                and Scene.objects.filter(chat=chat, epistemic_done=True).exists()
                and Memory.objects.filter(chat=chat, kind="summary").exists()
                and not PipelineJob.objects.filter(chat=chat, state__in=["queued", "running"]).exists()
            ),
            timeout=120,
            what="extraction of the appended messages",
            worker=worker,
        )

    mine = Memory.objects.filter(user=user, origin="extraction", status="active")
    assert set(mine.values_list("kind", flat=True)) >= {
        "summary",
        "scene_recap",
        "epistemic",
        "state",
        "revelation",
        "detail",
        "fact",
        "relationship",
        "arc",
    }
    scene = Scene.objects.get(chat=chat)
    assert (scene.start_index, scene.end_index) == (0, 12)
    assert mine.get(kind="summary").data["summary_end"] == through(chat, "compaction") > 0
    assert {m.data["entity"] for m in mine.filter(kind="state")} == {"Rowan", "brass key"}
    assert not PipelineJob.objects.filter(chat=chat, state="failed").exists()


@pytest.mark.slow  # about 8 s: .ci/run runs it after make test
def test_an_edit_while_a_job_runs_discards_its_results_and_the_tier_runs_again(
    api, user, character, worker_model, broker
):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    worker_model.on(TASKS["session"], "[detail:2:scene] The fresh detail.")
    worker_model.on(TASKS["session"], Reply("[detail:2:scene] The stale detail.", delay=4), times=1)
    append(api, chat, turns(0, 10))
    with celery_worker(broker) as worker:
        wait_for(
            lambda: (
                PipelineJob.objects.filter(chat=chat, tier="session", state="running").exists()
                and worker_model.prompts(TASKS["session"])
            ),
            timeout=60,
            what="the session pass asking the model",
            worker=worker,
        )
        integrity = Chat.objects.get(pk=chat.pk).integrity
        response = api.patch(
            f"/api/v1/chats/{chat.pk}/messages/5/",
            {"mes": "Rowan tears the ledger page out."},
            format="json",
            HTTP_IF_MATCH=f'"{integrity}"',
        )
        assert response.status_code == 200, response.content
        wait_for(
            lambda: PipelineJob.objects.filter(chat=chat, tier="session", state="done").exists(),
            timeout=60,
            what="the session pass running again",
            worker=worker,
        )
    discarded = PipelineJob.objects.get(chat=chat, tier="session", state="discarded")
    assert "were edited, swiped or deleted while it ran" in discarded.error
    details = Memory.objects.filter(user=user, kind="detail")
    assert list(details.values_list("content", flat=True)) == ["The fresh detail."]
    assert "Rowan tears the ledger page out." in worker_model.prompts(TASKS["session"])[-1]
