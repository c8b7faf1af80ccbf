"""A turn's recall searched ahead (apps/injection/services/recall.py `recall_ahead`): started on a connection of its
own while a reply's preparation writes the chat, taken by the build when it asks the same search, and never the
cause of another recall than the build's own search would make."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from django.db import connection, transaction

from apps.accounts.services import settings_document_get
from apps.injection.services import recall
from apps.injection.services.context import context_build
from apps.injection.services.recall import RecallAhead, recall_ahead
from apps.injection.services.settings import injection_settings_save
from tests.injection.helpers import ASK

pytestmark = pytest.mark.django_db(transaction=True)

TRIGGERED = "smart_memory_triggered"


def _recalled(context) -> tuple[list[int], str, list[dict]]:
    slot = context.slots[TRIGGERED]
    return slot["memory_ids"], slot["text"], context.recall["memories"]


@pytest.fixture
def where(monkeypatch):
    """The thread and database session each recall search ran in."""
    seen: list[tuple[int, int]] = []
    search = recall.memory_search

    def recorded(**kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            seen.append((threading.get_ident(), cursor.fetchone()[0]))
        return search(**kwargs)

    monkeypatch.setattr(recall, "memory_search", recorded)
    return seen


def _session() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_the_search_ahead_runs_on_its_own_connection_beside_the_preparation_and_the_build_takes_it(
    user, story, facts, where
):
    with transaction.atomic():  # as a reply's preparation: one transaction
        here = (threading.get_ident(), _session())
        ahead = recall_ahead(user=user, chat=story, message=ASK)
        context = context_build(user=user, chat=story, message=ASK, ahead=ahead)

    assert len(where) == 1 and where[0][0] != here[0] and where[0][1] != here[1]  # searched once, elsewhere
    assert _recalled(context)[0][0] == facts["dog"].pk
    assert "search_waited" in context.timings_ms and context.recall["source"] == "new"


def test_the_build_recalls_what_its_own_search_recalls(user, story, facts):
    alone = context_build(user=user, chat=story, message=ASK, preview=True)

    with transaction.atomic():
        ahead = recall_ahead(user=user, chat=story, message=f"  {ASK}\x00 ")  # as the preparation cleans it
        searched_ahead = context_build(user=user, chat=story, message=ASK, preview=True, ahead=ahead)

    assert "search_waited" in searched_ahead.timings_ms and "search_waited" not in alone.timings_ms
    assert _recalled(searched_ahead) == _recalled(alone)
    assert alone.recall["memories"] and alone.recall["memories"][0]["id"] == facts["dog"].pk


def test_a_search_ahead_for_another_message_is_not_taken(user, story, facts, where):
    alone = context_build(user=user, chat=story, message=ASK, preview=True)
    ahead = recall_ahead(user=user, chat=story, message="Where is the harbour master tonight?")

    context = context_build(user=user, chat=story, message=ASK, preview=True, ahead=ahead)

    assert "search_waited" not in context.timings_ms
    assert len(where) == 3  # the build searched for its own message
    assert _recalled(context) == _recalled(alone)


def test_a_search_ahead_for_another_chat_or_limit_is_not_taken(user, story, facts):
    alone = context_build(user=user, chat=story, message=ASK, preview=True)
    ahead = recall_ahead(user=user, chat=story, message=ASK)
    for other in (RecallAhead(story.pk + 1, ahead.query, ahead.limit, ahead.outcome),
                  RecallAhead(story.pk, ahead.query, ahead.limit + 1, ahead.outcome)):  # fmt: skip
        context = context_build(user=user, chat=story, message=ASK, preview=True, ahead=other)
        assert "search_waited" not in context.timings_ms and _recalled(context) == _recalled(alone)


def test_a_search_ahead_that_failed_or_hangs_leaves_the_build_to_search_itself(user, story, facts, monkeypatch):
    failed: Future = Future()
    failed.set_exception(RuntimeError("the connection dropped"))
    hung: Future = Future()  # never answers
    monkeypatch.setattr(recall, "AHEAD_WAIT", 0.2)
    limit = recall.injection_settings_get(user=user).triggered_limit
    alone = context_build(user=user, chat=story, message=ASK, preview=True)

    for outcome in (failed, hung):
        ahead = RecallAhead(story.pk, ASK, limit, outcome)
        context = context_build(user=user, chat=story, message=ASK, preview=True, ahead=ahead)
        assert "search_waited" not in context.timings_ms and _recalled(context) == _recalled(alone)


def test_no_search_is_started_when_the_settings_recall_nothing_or_there_is_no_message(user, story, facts, where):
    assert recall_ahead(user=user, chat=story, message=" \x00 ") is None
    off = {"slots": {"triggered": {"enabled": False}}}
    injection_settings_save(user=user, values=off, integrity=settings_document_get(user=user).integrity)
    assert recall_ahead(user=user, chat=story, message=ASK) is None
    assert where == []
