"""A streaming generation holds a lease, renewed with its text so far; one whose process died is ended failed,
keeping that text: by the sweep, and by a retry with its Idempotency-Key, which then replays it. The last test
kills a real uvicorn worker under gunicorn in the middle of a reply."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import httpx
import psutil
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone

from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.models import Generation
from apps.generation.services.generate import generation_prepare
from apps.generation.services.lease import LAPSED
from apps.generation.services.stream import generation_events
from apps.generation.tasks import sweep
from tests.generation.test_generate_api import generate, last
from tests.llm_server import Reply
from tests.servers import gunicorn

pytestmark = pytest.mark.django_db
SLOW = " ".join(f"tide{n}" for n in range(200))


@pytest.fixture
def story(user, character, scripted):
    """A chat whose last message is the character's (as in test_generate_api.py)."""
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    line = {"name": "Mira", "is_user": False, "mes": "The lantern is lit."}
    return chat_append(chat=chat, messages=[line], integrity=chat.integrity).chat


def _died_streaming(user, story, *, key: str, text: str) -> Generation:
    """A generation as a killed process leaves it: prepared, its text saved by its last renewal, its lease over."""
    generation = generation_prepare(user=user, chat=story, message="Any ships?", idempotency_key=key).generation
    Generation.objects.filter(pk=generation.pk).update(text=text, lease_until=timezone.now() - timedelta(seconds=1))
    return generation


def test_the_stream_renews_its_lease_saving_the_text_so_far(user, story, llm, settings):
    settings.LOREKEEPER_GENERATION = {**settings.LOREKEEPER_GENERATION, "lease_seconds": 0.6}  # renewed every 0.2 s
    llm.server.on("Any ships?", Reply(SLOW, tokens_per_second=20))
    generation = generation_prepare(user=user, chat=story, message="Any ships?").generation
    seen = []

    async def run():
        async for event in generation_events(generation):
            if event.name == "delta" and len(seen) < 3:
                seen.append(await sync_to_async(Generation.objects.get)(pk=generation.pk))
                if len(seen) == 3:
                    break

    async_to_sync(run)()
    saved = seen[-1]
    assert saved.state == "streaming" and saved.text and SLOW.startswith(saved.text)
    assert saved.lease_until > timezone.now() - timedelta(seconds=0.5)


def test_a_retry_finding_its_generation_dead_replays_it_failed_with_what_arrived(api, user, story, llm):
    generation = _died_streaming(user, story, key="send-1", text="One ship came")
    response = generate(api, story, key="send-1", message="Any ships?")
    assert response.status_code == 500, response.json()  # not 409 generation_in_progress, ever again
    body = response.json()
    assert body["state"] == "failed" and body["text"] == "One ship came" and body["message"]["mes"] == "One ship came"
    assert (body["error"], body["reason"], body["detail"]) == ("server_error", "lease", LAPSED)
    assert last(story).extra["lorekeeper"] == {"generation": str(generation.uid), "state": "failed", "reason": "lease"}
    again = generate(api, story, key="send-1", message="Any ships?")
    assert again.status_code == 500 and again.json() == body
    assert not llm.server.requests  # never asked the model again


def test_the_sweep_ends_generations_whose_lease_ran_out_and_only_those(user, story, llm):
    dead = _died_streaming(user, story, key="dead", text="Half a rep")
    alive = Generation.objects.create(  # another's, its process alive
        user=user, chat=story, mode="impersonate", lease_until=timezone.now() + timedelta(seconds=30)
    )
    assert sweep() == 1
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert (dead.state, dead.text, dead.stop_reason, dead.error) == ("failed", "Half a rep", "lease", LAPSED)
    assert alive.state == "streaming"
    stored = Message.objects.get(chat=story, index=dead.expected_count)
    assert stored.mes == "Half a rep" and stored.extra["lorekeeper"]["state"] == "failed"
    assert sweep() == 0


def _worker_of(url: str) -> psutil.Process:
    """The uvicorn worker behind `url`: the only child of the gunicorn master listening there."""
    port = url.rsplit(":", 1)[1]
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "gunicorn" in line and f"127.0.0.1:{port}" in line and process.ppid() not in _pids(line, port):
            (worker,) = process.children()
            return worker
    raise AssertionError("no gunicorn master found")


def _pids(line: str, port: str) -> set[int]:
    """The gunicorn processes serving `port` (a worker's parent is one of them, the master's is not)."""
    return {
        p.pid for p in psutil.process_iter(["cmdline"]) if f"127.0.0.1:{port}" in " ".join(p.info["cmdline"] or [])
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_reply_leaves_it_failed_with_its_text_and_its_key_replays_it(
    user, story, llm, token, broker
):
    llm.server.on("Any ships?", Reply(SLOW, tokens_per_second=10))
    lease = 2.0
    env = {"LOREKEEPER_PROVIDER_PRIVATE_HOSTS": "true", "LOREKEEPER_GENERATION_LEASE_SECONDS": str(lease)}
    with gunicorn(broker=broker, workers=1, asgi=True, **env) as url:
        headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "kill-1"}
        request = {"message": "Any ships?"}
        worker = _worker_of(url)
        with httpx.Client(timeout=30) as client:
            with client.stream("POST", f"{url}/api/v1/chats/{story.pk}/generate", json=request, headers=headers) as r:
                assert r.status_code == 200
                lines = r.iter_lines()  # held, not closed: the client stays
                deltas = 0
                while deltas < 3:
                    deltas += next(lines) == "event: delta"
                time.sleep(lease)  # a renewal or more has saved text meanwhile
                os.kill(worker.pid, signal.SIGKILL)
            generation = Generation.objects.get(idempotency_key="kill-1")
            assert generation.state == "streaming" and generation.text  # as the killed worker left it
            time.sleep(max(0.0, (generation.lease_until - timezone.now()).total_seconds()) + 0.2)

            assert sweep() == 1  # what the beat does every half minute
            generation.refresh_from_db()
            assert generation.state == "failed" and generation.stop_reason == "lease"
            assert generation.text and SLOW.startswith(generation.text)
            assert last(story).mes == generation.text

            retry = client.post(
                f"{url}/api/v1/chats/{story.pk}/generate", json={**request, "stream": False}, headers=headers
            )
    assert retry.status_code == 500 and retry.json()["state"] == "failed"
    assert retry.json()["text"] == generation.text and retry.json()["generation"] == str(generation.uid)
