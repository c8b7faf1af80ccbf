"""A client that leaves while its reply is prepared (the context built, the prompt made): the reply, recorded as
streaming but never streamed, ends at once, stopped, rather than holding one of the person's streams until its
lease runs out. Served as in production (gunicorn, uvicorn workers), the client a real socket closed mid-request."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from django.db import connection, transaction

from apps.generation.models import Generation
from apps.generation.services.lease import _LOCK_CLASS
from tests.generation.test_generate_api import story  # noqa: F401 — the fixture
from tests.llm_server import Reply
from tests.servers import gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SLOW = " ".join(f"tide{n}" for n in range(200))  # 20 s at 10 tokens a second


def _posted(url: str, path: str, body: dict, headers: dict[str, str]) -> socket.socket:
    """A request sent whole on a socket of its own, its answer not read: the caller closes the socket to leave."""
    address = urlsplit(url)
    data = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {address.netloc}", "Content-Type: application/json",
             f"Content-Length: {len(data)}", *(f"{name}: {value}" for name, value in headers.items())]  # fmt: skip
    sock = socket.create_connection((address.hostname, address.port))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    return sock


def _until(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)
    return found


def _waiting_for_the_persons_lock(user_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = %s "
            "AND objid = %s",
            [_LOCK_CLASS, user_id % 2**31],
        )
        return cursor.fetchone()[0] > 0


REQUESTS = {
    "generate API": lambda chat: (f"/api/v1/chats/{chat.pk}/generate", {"message": "Any ships?"}),
    "gateway": lambda chat: (
        "/v1/chat/completions",
        {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "Any ships at the pier?"}]},
    ),
}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("asked", REQUESTS)
def test_a_client_leaving_while_its_reply_is_prepared_ends_it_at_once(asked, stream, user, story, llm, token, broker):  # noqa: F811
    """Streamed or asked for whole: a reply waited for whole would otherwise be asked of the model once prepared,
    and run to its end (what the view begins after the request was cancelled is not cancelled with it)."""
    llm.server.on(lambda prompt: True, Reply(SLOW, tokens_per_second=10))
    path, body = REQUESTS[asked](story)
    body = {**body, "stream": stream}
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "left-1"}
    # A lease far longer than the wait below: only the client's leaving can end the reply within it. The model is
    # reachable (a private host): were it asked, it would answer.
    env = {"LOREKEEPER_PROVIDER_PRIVATE_HOSTS": "true", "LOREKEEPER_GENERATION_LEASE_SECONDS": "60"}
    with gunicorn(broker=broker, workers=1, asgi=True, **env) as url:
        with transaction.atomic():
            # The person's lock, which the preparation takes to count their streams, held here: the request waits
            # in the middle of its preparation until the client has gone.
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, user.pk % 2**31])
            sock = _posted(url, path, body, headers)
            _until(lambda: _waiting_for_the_persons_lock(user.pk), 30, "the request waiting in its preparation")
            sock.close()
            time.sleep(0.5)  # the server hears the client leave, then the preparation goes on
        generation = _until(
            lambda: Generation.objects.filter(user=user, idempotency_key="left-1").exclude(state="streaming").first(),
            10,
            "the reply prepared for a client that left ended",
        )
        assert (generation.state, generation.text, generation.message_index) == ("stopped", "", None)
        assert "left" in generation.error
        assert not llm.server.requests  # the model was never asked

        retry = httpx.post(f"{url}{path}", json={**body, "stream": False}, headers=headers, timeout=30)
        assert retry.status_code == 200, retry.text  # its answer, not 409 generation_in_progress for a minute


@pytest.mark.parametrize("asked", REQUESTS)
def test_a_client_leaving_a_reply_it_waits_for_whole_stops_the_model(asked, user, story, llm, token, broker):  # noqa: F811
    """Not streamed (`stream` false, OpenAI's default): the client waits for the whole reply, and leaves (a Stop
    in a front end). The model is stopped and what arrived kept, as when a stream's client leaves; the reply does
    not run on to its end, holding one of the person's streams meanwhile."""
    llm.server.on(lambda prompt: True, Reply(SLOW, tokens_per_second=10))  # 20 s, whole
    path, body = REQUESTS[asked](story)
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "left-2"}
    env = {"LOREKEEPER_PROVIDER_PRIVATE_HOSTS": "true", "LOREKEEPER_GENERATION_LEASE_SECONDS": "60"}
    with gunicorn(broker=broker, workers=1, asgi=True, **env) as url:
        sock = _posted(url, path, {**body, "stream": False}, headers)
        _until(lambda: llm.server.requests, 30, "the model asked")
        time.sleep(1.5)  # some of the reply arrives
        sock.close()
        generation = _until(
            lambda: Generation.objects.filter(user=user, idempotency_key="left-2").exclude(state="streaming").first(),
            5,
            "the reply its client left ended",
        )
    assert generation.state == "stopped", (generation.state, generation.error)
    assert generation.text and SLOW.startswith(generation.text) and generation.text != SLOW
