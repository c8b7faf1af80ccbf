"""A reply's recall embeds the person's message beside the reply's preparation (apps/memories/search/query.py): the
message is written, the chat read and the memory gathered while its query is embedded, once, in a thread of its
own; a search of another query, or an embedding ahead that failed, embeds its own query as before. Committed data
(transaction=True), so that the work beside runs on a connection of its own, as in a server."""

from __future__ import annotations

import threading

import pytest

from apps.accounts.services import settings_document_get
from apps.generation.services.generate import generation_prepare
from apps.injection.services.settings import injection_settings_save
from apps.memories import embeddings
from apps.memories.search import memory_search, memory_search_ahead
from tests.injection.helpers import ASK, DOG

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asked(monkeypatch):
    """Every query a search embeds (embed_query's, not indexing's), with the thread that asked."""
    queries: list[tuple[str, list[str]]] = []
    real = embeddings.embed_texts

    def spy(config, texts, *, store=True):
        if config.retries == 0:  # embed_query's one try: a person is waiting (indexing retries)
            queries.append((threading.current_thread().name, list(texts)))
        return real(config, texts, store=store)

    monkeypatch.setattr(embeddings, "embed_texts", spy)
    return queries


def test_a_reply_embeds_the_persons_message_beside_its_preparation_and_once(user, story, facts, llm, asked):
    prepared = generation_prepare(user=user, chat=story, message=ASK)
    request_thread = threading.current_thread().name
    assert [texts for _, texts in asked] == [[ASK]], asked  # once: the search took the vectors made ahead
    assert asked[0][0] != request_thread and asked[0][0].startswith("beside")
    generation = prepared.generation
    assert generation.prompt_info["recall"]["source"] == "new"
    assert DOG in str(generation.prompt)  # the memory the message asks about reached the model's prompt


def test_with_recall_switched_off_nothing_is_embedded_ahead(user, story, facts, llm, asked):
    injection_settings_save(
        user=user,
        values={"slots": {"triggered": {"enabled": False}}, "unified": False},
        integrity=settings_document_get(user=user).integrity,
    )
    generation_prepare(user=user, chat=story, message=ASK)
    assert asked == []


def test_a_search_of_another_query_begins_its_own(user, facts, asked):
    here = threading.current_thread().name
    with memory_search_ahead(user=user, query="Where does the ferry stop?"):
        found = memory_search(user=user, query=ASK)
        assert DOG in [hit.memory.content for hit in found.results] and found.method == "hybrid"
        assert [texts for thread, texts in asked if thread == here] == [[ASK]]
        with memory_search_ahead(user=user, query=ASK, kinds=["fact"]):
            memory_search(user=user, query=ASK)  # of every kind: not the search begun
        assert [texts for thread, texts in asked if thread == here] == [[ASK], [ASK]]
    asked.clear()
    memory_search(user=user, query="Where does the ferry stop?")  # the block has ended: nothing is held
    assert [texts for thread, texts in asked if thread == here] == [["Where does the ferry stop?"]]


def test_a_search_begun_ahead_answers_as_the_search_itself(user, facts, asked):
    itself = memory_search(user=user, query=ASK)
    with memory_search_ahead(user=user, query=ASK):
        ahead = memory_search(user=user, query=ASK)
    assert [(hit.memory.pk, hit.score) for hit in ahead.results] == [
        (hit.memory.pk, hit.score) for hit in itself.results
    ]
    assert [texts for _, texts in asked] == [[ASK], [ASK]] and asked[1][0].startswith("beside")


def test_an_embedding_ahead_that_failed_is_made_again_by_the_search(user, facts, asked, monkeypatch):
    from apps.memories.search import query

    def broken(user, query):
        raise RuntimeError("the connection beside went away")

    monkeypatch.setattr(query, "_embedded", broken)
    with memory_search_ahead(user=user, query=ASK):
        found = memory_search(user=user, query=ASK)
    assert found.method == "hybrid" and DOG in [hit.memory.content for hit in found.results]
    assert [texts for thread, texts in asked if thread == threading.current_thread().name] == [[ASK]]
