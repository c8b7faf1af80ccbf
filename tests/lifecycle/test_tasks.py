"""Lifecycle work happens in a real Celery worker: a worker that starts catches up on missed periods by itself, and
a manual run requested over the API is done there, not in the request."""

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from apps.chats.services.chats import chat_create
from apps.memories.embeddings import text_hash
from apps.memories.models import LifecycleJob, Memory
from apps.memories.services.settings import embedding_settings_set
from tests.worker import ROOT, worker_env


def _wait(condition, worker, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, f"the worker did not {what} within {seconds:.0f} s"
        time.sleep(0.25)


@pytest.mark.django_db(transaction=True)
def test_a_starting_worker_catches_up_and_runs_manual_requests(api, user, character, hosted_llm, broker):
    embedding_settings_set(user=user, provider="none")  # keep the worker from loading the local model
    hosted_llm.server.on("summary for", "A quiet day at the harbour.")
    chat = chat_create(user=user, title="Journal", character_ids=[character.pk])
    said = Memory.objects.create(
        user=user, chat=chat, kind="message", message_index=0, content="Mira: Quiet.", content_hash=text_hash("Quiet.")
    )
    Memory.objects.filter(pk=said.pk).update(created_at=datetime.now(UTC) - timedelta(days=3))

    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"],
        cwd=ROOT,
        env=worker_env(broker),
    )
    try:
        # Nobody asked: the worker's start-up catch-up found the missed days.
        _wait(lambda: Memory.objects.filter(kind="daily").exists(), worker, "catch up")
        job = LifecycleJob.objects.get()
        assert (job.type, job.params["manual"]) == ("hierarchy", False)
        _wait(lambda: LifecycleJob.objects.get(pk=job.pk).state == "done", worker, "finish its job")

        day = Memory.objects.get(kind="daily").data["period"]
        response = api.post(
            "/api/v1/memories/hierarchy",
            {"character": character.pk, "granularity": "daily", "period": day},
            format="json",
        )
        # Queued for the worker, which may have claimed it already by the time the answer reads it back.
        assert response.status_code == 202 and response.json()["state"] in ("queued", "running", "done")
        manual = response.json()["id"]
        assert LifecycleJob.objects.get(pk=manual).params["manual"] is True
        _wait(lambda: LifecycleJob.objects.get(pk=manual).state == "done", worker, "run the manual request")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert Memory.objects.filter(kind="daily", status="active").count() == 1
    assert Memory.objects.filter(kind="daily", status="retired", retired_reason="superseded").count() == 1
