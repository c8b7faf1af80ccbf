"""Nothing is lost by accident: deleting a character keeps what its chats taught unless the person says otherwise,
a stale edit form never overwrites a newer edit, and background indexing neither does its work twice nor fails when
the chat it indexes is deleted under it."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from django.db import connection, transaction

from apps.chats.models import Chat
from apps.chats.services.characters import character_create
from apps.chats.services.chats import chat_create, chat_delete, chat_import
from apps.memories import tasks
from apps.memories.models import Memory, MemoryScope
from apps.memories.selectors import memory_list
from apps.memories.services.indexing import chat_index_progress
from apps.memories.services.memories import memory_create
from tests.memories.embedding_server import EmbeddingServer, handler_for
from tests.memories.helpers import jsonl, jsonl_bytes
from tests.worker import ROOT, wait_for, worker_env

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------------------------------------ deleting a character


@pytest.fixture
def taught(user):
    """Mira, a chat with her, and three memories of hers: one of her own, one extraction drew from the chat into
    her persistent memory, one held in the chat's own scope."""
    mira = character_create(user=user, name="Mira")
    chat = chat_create(user=user, title="Lighthouse", character_ids=[mira.pk])
    own = memory_create(user=user, character=mira, kind="fact", content="Mira was born in Harrowgate.")
    drawn = memory_create(user=user, character=mira, kind="fact", content="Mira fears the dark.", source_chat=chat)
    held = memory_create(user=user, character=mira, chat=chat, kind="event", content="Mira relit the lantern.")
    return {"mira": mira, "chat": chat, "own": own, "drawn": drawn, "held": held}


def _kept_in_chat(user, taught) -> list[str]:
    """The memories search and injection see for the chat, other than its messages."""
    memories = memory_list(user=user, chat_id=taught["chat"].pk, include_messages=False)
    return sorted(m.content for m in memories)


def test_the_delete_page_counts_the_memories_that_go_and_those_kept(web, taught):
    page = web.get(f"/characters/{taught['mira'].pk}/delete/").content.decode()
    assert "<strong>1 memory</strong> of Mira’s own" in page
    assert "<strong>2 memories</strong> drawn from their chats are kept" in page
    assert 'name="chat_memories" value="delete"' in page
    detail = web.get(f"/characters/{taught['mira'].pk}/").content.decode()
    assert "Their chats are kept" not in detail and f"/characters/{taught['mira'].pk}/delete/" in detail


def test_deleting_a_character_on_the_site_keeps_the_memories_drawn_from_its_chats(web, user, taught):
    response = web.post(f"/characters/{taught['mira'].pk}/delete/", follow=True)
    assert "Deleted Mira and 1 memory; their chats are kept. 2 memories drawn from their chats are kept." in (
        response.content.decode()
    )
    assert not Memory.objects.filter(pk=taught["own"].pk).exists()
    for key in ("drawn", "held"):
        memory = Memory.objects.get(pk=taught[key].pk)
        assert (memory.character_id, memory.chat_id, memory.version) == (None, taught["chat"].pk, 2)
    assert _kept_in_chat(user, taught) == ["Mira fears the dark.", "Mira relit the lantern."]
    assert Chat.objects.filter(pk=taught["chat"].pk).exists()


def test_ticking_the_box_deletes_the_memories_drawn_from_the_chats_too(web, user, taught):
    response = web.post(f"/characters/{taught['mira'].pk}/delete/", {"chat_memories": "delete"}, follow=True)
    assert "Deleted Mira and 3 memories; their chats are kept." in response.content.decode()
    assert not Memory.objects.filter(user=user).exists()
    assert Chat.objects.filter(pk=taught["chat"].pk).exists()


def test_the_api_keeps_chat_memories_unless_asked_and_says_how_many_went(api, user, taught, other_api):
    url = f"/api/v1/characters/{taught['mira'].pk}/"
    assert other_api.delete(url).status_code == 404
    refused = api.delete(f"{url}?memories=all")
    assert refused.status_code == 400 and refused.json()["extra"]["field"] == "memories"
    assert Memory.objects.filter(user=user).count() == 3
    response = api.delete(url)
    assert response.status_code == 200 and response.json() == {"memories_deleted": 1, "memories_kept": 2}
    assert _kept_in_chat(user, taught) == ["Mira fears the dark.", "Mira relit the lantern."]


def test_the_api_deletes_chat_memories_when_asked(api, user, taught):
    response = api.delete(f"/api/v1/characters/{taught['mira'].pk}/?memories=delete")
    assert response.status_code == 200 and response.json() == {"memories_deleted": 3, "memories_kept": 0}
    assert not Memory.objects.filter(user=user).exists()


# ------------------------------------------------------------------------------------------------ stale edit forms

HX = {"HTTP_HX_REQUEST": "true"}


def _opened_form(web, memory, **headers) -> dict:
    """The fields of the memory's edit form as the page rendered them (hidden version included)."""
    html = web.get(f"/memories/{memory.pk}/edit/", **headers).content.decode()
    fields = dict(re.findall(r'<input type="(?:hidden|number|text)" name="(\w+)" value="([^"]*)"', html))
    fields["content"] = re.search(r'<textarea name="content"[^>]*>\n?([^<]*)</textarea>', html).group(1)
    fields["kind"], fields["importance"] = "fact", "2"
    return fields


@pytest.mark.parametrize("headers", [HX, {}], ids=["htmx", "full page"])
def test_a_stale_memory_form_is_refused_and_keeps_both_edits(web, user, taught, headers):
    memory = taught["own"]
    first, second = _opened_form(web, memory, **headers), _opened_form(web, memory, **headers)
    assert first["version"] == second["version"] == "1"
    saved = web.post(f"/memories/{memory.pk}/edit/", {**first, "content": "Mira was born at sea."}, **headers)
    assert saved.status_code in (200, 302)

    stale = web.post(f"/memories/{memory.pk}/edit/", {**second, "content": "Mira was born in a storm."}, **headers)
    assert stale.status_code == 409
    html = stale.content.decode()
    assert "changed in another tab or on another device" in html and "Nothing was saved yet" in html
    assert "Mira was born at sea." in html  # the newer edit, shown
    # The person's text, kept in the form.
    assert re.search(r'<textarea name="content"[^>]*>\s*Mira was born in a storm.</textarea>', html)
    assert '<input type="hidden" name="version" value="2"' in html  # saving again is a deliberate overwrite
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Mira was born at sea.", 2)

    again = web.post(f"/memories/{memory.pk}/edit/", {**second, "version": "2", "content": "Born in a storm."})
    assert again.status_code == 302
    memory.refresh_from_db()
    assert (memory.content, memory.version) == ("Born in a storm.", 3)


def test_an_edit_form_without_its_version_saves_nothing(web, taught):
    memory = taught["own"]
    fields = _opened_form(web, memory)
    del fields["version"]
    response = web.post(f"/memories/{memory.pk}/edit/", {**fields, "content": "Overwritten."}, **HX)
    assert response.status_code == 400 and "does not say which version it edits" in response.content.decode()
    assert Memory.objects.get(pk=memory.pk).content == "Mira was born in Harrowgate."


# ------------------------------------------------------------------------------------------------ a gated provider


@dataclass
class GatedEmbeddingServer(EmbeddingServer):
    """The scripted embedding server, whose first request waits inside the call until `release` is set (or
    `hold` seconds pass): the seam a test uses to act while an indexing run is inside a provider call."""

    hold: float = 10.0
    inside: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _held: bool = False

    def vector_for(self, text: str, model: str) -> list[float]:
        with self._lock:
            first, self._held = not self._held, True
        if first:
            self.inside.set()
            self.release.wait(self.hold)
        return super().vector_for(text, model)


@pytest.fixture
def gated(settings):
    server = GatedEmbeddingServer()
    server.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(server))
    server.httpd.daemon_threads = True
    server.port = server.httpd.server_address[1]
    threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "openai"
    settings.LOREKEEPER_EMBEDDINGS_MODEL = "scripted"
    settings.LOREKEEPER_EMBEDDINGS_URL = f"{server.url}/v1"
    settings.LOREKEEPER_EMBEDDINGS_API_KEY = "deployment-key"
    yield server
    server.release.set()
    server.stop()


def _story(count: int) -> list[tuple[str, str]]:
    return [("Mira" if i % 2 else "You", f"Line {i} of the long night at the lighthouse.") for i in range(count)]


def _in_thread(target, results: list, errors: list) -> threading.Thread:
    def run() -> None:
        try:
            results.append(target())
        except BaseException as exc:  # noqa: BLE001 — the test reports it
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


# ------------------------------------------------------------------------------------------------ indexing runs


def _index_and_embed(chat) -> dict:
    """What a worker process does for a chat written: its reconciliation, then an embedding run it queued (here
    sent to a broker no worker reads)."""
    counts = tasks.index_chat(chat.pk)
    counts["embedded"] = 0
    while embedded := tasks.embed_pending(chat.user_id, chat.pk):  # a batch a run, each queuing the next
        counts["embedded"] += embedded
    return counts


@pytest.mark.django_db(transaction=True)
def test_two_index_runs_of_one_chat_at_once_embed_each_message_once(user, broker, gated):
    # Sent to a broker no worker reads: the import's own task never runs, the two runs below are the only ones.
    chat = chat_import(user=user, stream=jsonl(*_story(300)), title="Long night")
    gated.hold = 3.0  # the first call waits for a second run's call, which must never come
    results, errors = [], []
    threads = [_in_thread(lambda: _index_and_embed(chat), results, errors) for _ in range(2)]
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    texts = gated.embedded_texts()
    assert len(texts) == len(set(texts)) == 300
    assert chat_index_progress(chat=chat)["pending"] == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow  # about 11 s: .ci/run runs it after make test
def test_a_chat_deleted_while_its_index_run_embeds_ends_the_run_quietly(user, broker, gated, caplog):
    chat = chat_import(user=user, stream=jsonl(*_story(300)), title="Long night")
    results, errors = [], []
    with caplog.at_level(logging.WARNING):
        thread = _in_thread(lambda: _index_and_embed(chat), results, errors)
        assert gated.inside.wait(30), "the run never called the provider"
        chat_delete(chat=Chat.objects.get(pk=chat.pk))
        gated.release.set()
        thread.join(timeout=120)
    assert not thread.is_alive() and not errors, errors
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert not Chat.objects.filter(pk=chat.pk).exists()
    assert not Memory.objects.filter(user=user).exists()


def _another_session_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # pg_stat_activity is otherwise read once a transaction
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.django_db(transaction=True)
def test_a_chat_deleted_while_its_index_run_writes_ends_the_run_quietly(user, broker, settings, caplog):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"
    chat = chat_import(user=user, stream=jsonl(*_story(300)), title="Long night")
    MemoryScope.objects.create(chat=chat)
    results, errors = [], []
    with caplog.at_level(logging.WARNING), transaction.atomic():
        # The run writes the chat's memory scope row as it ends its reconciliation; holding that row keeps the run
        # inside its transaction, its message memories written, while the chat is deleted and the deletion commits.
        MemoryScope.objects.select_for_update().get(chat=chat)
        thread = _in_thread(lambda: tasks.index_chat(chat.pk), results, errors)
        wait_for(_another_session_waits_on_a_lock, timeout=60, what="the run reaching the scope row")
        chat_delete(chat=chat)
    thread.join(timeout=60)
    assert not thread.is_alive() and not errors, errors
    assert results == [{}]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert not Chat.objects.filter(pk=chat.pk).exists() and not Memory.objects.filter(user=user).exists()


@pytest.mark.django_db(transaction=True)
def test_an_import_runs_one_index_task_for_its_chat(api, user, broker, tmp_path: Path, settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"  # as in the worker below: indexing is the reconciliation only
    log = tmp_path / "worker.log"
    response = api.post(
        "/api/v1/chats/import?title=Once", data=jsonl_bytes(*_story(40)), content_type="application/jsonl"
    )
    assert response.status_code == 201, response.content
    chat = Chat.objects.get(pk=response.json()["id"])
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=INFO"],
            cwd=ROOT,
            env=worker_env(broker, LOREKEEPER_CELERY_EAGER="0", LOREKEEPER_EMBEDDINGS_PROVIDER="none"),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for(
                lambda: chat_index_progress(chat=chat)["pending"] == 0,
                timeout=120,
                what="indexing",
                worker=worker,
            )
            time.sleep(4)  # time for a second task to arrive, were one sent
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    received = [line for line in log.read_text().splitlines() if "memories.index_chat[" in line and "received" in line]
    assert len(received) == 1, log.read_text()
