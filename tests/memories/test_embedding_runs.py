"""One user's embedding backlog shared by runs in several worker processes: each claims batches of rows of its own,
so no row is embedded twice and a long chat is embedded on every core."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from apps.chats.models import Character, Chat
from apps.memories.models import Kind, Memory
from apps.memories.services.indexing import EMBED_BATCH, chat_index_progress, memories_embed_pending
from apps.memories.services.settings import embedding_settings_set
from tests.memories.helpers import jsonl_bytes
from tests.worker import celery_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def backlog(user, count: int) -> None:
    character = Character.objects.create(user=user, name="Mira")
    Memory.objects.bulk_create(
        Memory(user=user, character=character, kind=Kind.FACT, content=f"fact number {n}", content_hash=f"{n:064x}")
        for n in range(count)
    )


def test_two_runs_at_once_share_the_backlog_and_never_embed_a_row_twice(user, embedder):
    embedding_settings_set(user=user, provider="openai", model="scripted", base_url=f"{embedder.url}/v1")
    backlog(user, EMBED_BATCH * 4)
    embedder.delay = 0.3  # each batch's answer takes a while: the runs overlap
    done: list[int] = []

    def run() -> None:
        try:
            done.append(memories_embed_pending(user_id=user.pk))
        finally:
            connection.close()

    runs = [threading.Thread(target=run) for _ in range(2)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join(timeout=60)

    texts = Counter(embedder.embedded_texts())
    assert len(texts) == EMBED_BATCH * 4 and max(texts.values()) == 1
    assert sorted(done) != [0, EMBED_BATCH * 4] and sum(done) == EMBED_BATCH * 4  # both worked
    assert embedder.most_in_flight == 2
    assert not Memory.objects.filter(user=user, embedding__isnull=True).exists()


@pytest.mark.slow  # about 12 s: .ci/run runs it after make test
def test_a_real_worker_embeds_one_long_chat_in_two_processes_at_once(api, user, broker, embedder):
    embedding_settings_set(user=user, provider="openai", model="scripted", base_url=f"{embedder.url}/v1")
    lines = [("Mira" if n % 2 else "You", f"Line {n} of the long night.") for n in range(EMBED_BATCH * 8)]
    response = api.post("/api/v1/chats/import?title=Long", data=jsonl_bytes(*lines), content_type="application/jsonl")
    assert response.status_code == 201, response.content
    chat = Chat.objects.get(pk=response.json()["id"])
    embedder.delay = 0.5  # 8 batches: 4 s in one process, time enough for the second to join
    with celery_worker(broker, processes=2, LOREKEEPER_EMBEDDING_RUNS="2") as worker:
        wait_for(lambda: not chat_index_progress(chat=chat)["pending"], timeout=120, what="indexing", worker=worker)

    texts = Counter(embedder.embedded_texts())
    assert len(texts) == len(lines) and max(texts.values()) == 1
    assert embedder.most_in_flight == 2  # the second process helped


@pytest.mark.slow  # about 10 s: .ci/run runs it after make test
def test_chats_imported_together_are_all_findable_by_text_before_their_vectors_are_made(api, user, broker, embedder):
    """Each import queues its chat's reconciliation; the embedding runs are queued behind them, so no chat's
    messages wait, unfindable, for the vectors of the chats imported before it."""
    embedding_settings_set(user=user, provider="openai", model="scripted", base_url=f"{embedder.url}/v1")
    chats = []
    for name in ("First", "Second", "Third", "Fourth"):
        lines = [("Mira" if n % 2 else "You", f"{name} night, line {n}.") for n in range(EMBED_BATCH * 2)]
        response = api.post(
            f"/api/v1/chats/import?title={name}", data=jsonl_bytes(*lines), content_type="application/jsonl"
        )
        assert response.status_code == 201, response.content
        chats.append(response.json()["id"])
    embedder.delay = 1.0  # 8 batches in two processes: at least 4 s of embedding
    with celery_worker(broker, processes=2, LOREKEEPER_EMBEDDING_RUNS="2") as worker:

        def all_reconciled() -> bool:
            return Memory.objects.filter(user=user, kind=Kind.MESSAGE).count() == len(chats) * EMBED_BATCH * 2

        wait_for(all_reconciled, timeout=60, what="every chat's reconciliation", worker=worker, every=0.05)
        # Found by text at once, in the last chat imported too.
        found = api.post("/api/v1/memories/search", {"query": "Fourth night line 7", "chat": chats[-1]}, format="json")
        assert found.status_code == 200 and "Fourth night, line 7." in found.json()["results"][0]["content"]
        without_vector = Memory.objects.filter(user=user, embedding__isnull=True).count()
        assert without_vector >= len(chats) * EMBED_BATCH, "the reconciliations waited for the embedding"
        wait_for(
            lambda: not Memory.objects.filter(user=user, embedding__isnull=True).exists(),
            timeout=120,
            what="every vector",
            worker=worker,
        )
    texts = Counter(text for text in embedder.embedded_texts() if "night, line" in text)  # not the search's query
    assert len(texts) == len(chats) * EMBED_BATCH * 2 and max(texts.values()) == 1
