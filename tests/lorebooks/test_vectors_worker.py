"""A book's vectorized entries embedded by a real Celery worker once the book is imported over the API (the task
goes through a real broker): the first chat that compares them finds their vectors ready."""

from __future__ import annotations

import pytest

from apps.memories.embeddings import config_for, text_hash
from apps.memories.models import EmbeddingCache
from apps.memories.services.settings import embedding_settings_set
from tests.worker import celery_worker, tasks_sent_to, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FERRY = "The ferry fare is two silver coins, three after dark."


def test_an_imported_books_vectorized_entries_are_embedded_by_the_worker(api, user, embedder, broker):
    embedding_settings_set(user=user, provider="openai", model="scripted", base_url=f"{embedder.url}/v1")
    entries = {
        "0": {"uid": 0, "key": [], "vectorized": True, "content": FERRY},
        "1": {"uid": 1, "key": ["kraken"], "content": "Nobody has seen the kraken in years."},
    }
    key = config_for(user).key
    with tasks_sent_to(broker), celery_worker(broker) as worker:
        response = api.post("/api/v1/lorebooks/", {"name": "Harbour", "data": {"entries": entries}}, format="json")
        assert response.status_code == 201, response.json()
        wait_for(
            lambda: EmbeddingCache.objects.filter(model=key, content_hash=text_hash(FERRY)).exists(),
            timeout=60,
            what="the worker embedding the vectorized entry",
            worker=worker,
        )
    assert embedder.embedded_texts() == [FERRY]  # the entry found by its key needs no vector
