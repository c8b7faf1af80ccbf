"""Indexing happens in a real Celery worker, not in the request that wrote the chat."""

import subprocess
import sys
import time

import pytest

from apps.chats.models import Chat
from apps.memories.models import Memory
from apps.memories.services.indexing import chat_index_progress
from apps.memories.services.settings import embedding_settings_set
from tests.memories.helpers import jsonl_bytes
from tests.worker import ROOT, celery_worker, wait_for, worker_env


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_indexes_an_imported_chat_after_the_request_answered(api, user, broker, embedder):
    embedding_settings_set(user=user, provider="openai", model="scripted", base_url=f"{embedder.url}/v1")
    lines = [("Mira", "The lantern went out."), ("You", "Who relit it?"), ("Mira", "Corvin did."), ("You", "")]
    response = api.post(
        "/api/v1/chats/import?title=Worker", data=jsonl_bytes(*lines), content_type="application/jsonl"
    )
    assert response.status_code == 201, response.content
    chat = Chat.objects.get(pk=response.json()["id"])
    # No worker runs yet: the request only queued the work.
    assert chat_index_progress(chat=chat)["pending"] == 3
    assert not Memory.objects.filter(chat=chat).exists() and embedder.requests == []

    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"],
        cwd=ROOT,
        env=worker_env(broker),
    )
    try:
        deadline = time.monotonic() + 120
        while chat_index_progress(chat=chat)["pending"]:
            assert worker.poll() is None, "the worker died"
            assert time.monotonic() < deadline, "the worker did not index the chat within 120 s"
            time.sleep(0.25)
    finally:
        worker.terminate()
        worker.wait(timeout=30)

    body = api.get(f"/api/v1/chats/{chat.pk}/").json()
    assert (body["indexed_messages"], body["pending"]) == (3, 0)
    assert sorted(embedder.embedded_texts()) == sorted(
        ["Mira: The lantern went out.", "You: Who relit it?", "Mira: Corvin did."]
    )
    assert {m.embedding_model for m in Memory.objects.filter(chat=chat)} == {"openai:scripted"}


def test_a_worker_loads_the_local_model_before_it_forks_its_processes(settings):
    """worker_init, in the worker's main process: its pool's processes start with the model, not load it in a task."""
    from apps.memories import embedding_local
    from apps.memories.tasks import _load_model_before_fork

    loaded = dict(embedding_local._models)
    embedding_local._models.clear()
    try:
        settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"
        _load_model_before_fork()
        assert embedding_local._models == {}  # nothing to load for a deployment without the local model
        settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "local"
        _load_model_before_fork()
        assert [name for name, _ in embedding_local._models] == ["all-MiniLM-L6-v2"]
    finally:
        embedding_local._models.clear()
        embedding_local._models.update(loaded)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("threads", "precision"),
    [
        ("1", "float32"),  # the default thread count, in ONNX Runtime
        pytest.param("1", "bfloat16", marks=pytest.mark.slow),  # in PyTorch; .ci/run runs it after make test
        pytest.param("2", "float32", marks=pytest.mark.slow),
        pytest.param("2", "bfloat16", marks=pytest.mark.slow),
    ],
)
def test_a_prefork_worker_embeds_with_the_local_model_whatever_its_thread_count_and_runtime(
    api, broker, settings, threads, precision
):
    """With one thread the pool's processes get the model from their parent; with two (whose thread pool a forked
    process would inherit broken, and hang in) each loads its own. Either way, in ONNX Runtime (float32) or in
    PyTorch (bfloat16), the chat gets its vectors."""
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "local"
    lines = [("Mira", "The lantern went out."), ("You", "Who relit it?"), ("Mira", "Corvin did.")]
    response = api.post("/api/v1/chats/import?title=Local", data=jsonl_bytes(*lines), content_type="application/jsonl")
    assert response.status_code == 201, response.content
    chat = Chat.objects.get(pk=response.json()["id"])
    options = {
        "LOREKEEPER_EMBEDDINGS_PROVIDER": "local",
        "LOREKEEPER_EMBEDDINGS_THREADS": threads,
        "LOREKEEPER_EMBEDDINGS_PRECISION": precision,
    }
    with celery_worker(broker, processes=2, **options) as worker:
        wait_for(
            lambda: chat_index_progress(chat=chat) == {"indexable_messages": 3, "indexed_messages": 3, "pending": 0},
            timeout=120,
            what="the chat's vectors",
            worker=worker,
        )
    assert {m.embedding_model for m in Memory.objects.filter(chat=chat)} == {"local:all-MiniLM-L6-v2"}
