"""A web process keeps its connections to people's models open between replies (apps/llm/outbound.py), against the
scripted model over real HTTP answering as a keep-alive server does: two replies go over one TCP connection; a
stream stopped early is closed, not kept, so the model stops; no cookie a model sets goes with a later request; a
kept connection the server closed as idle is retried at once on a new one, a new one that closes is not; two
people's calls to one server never share a connection, so what a hostile server sends unasked reaches no one else;
past KEPT_SESSIONS the least recently used is closed; a blocking call's loop keeps nothing; and the server's
shutdown closes what was kept.

The loop is marked as a serving one the way the web process marks it, by passing a request through the ASGI
middleware of config/asgi.py (`connections_kept`), and released by the lifespan's shutdown through it too.
pytest-asyncio is not installed: each test drives its loop with `asyncio.run`."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from apps.llm import outbound
from apps.llm.client import LlmError
from apps.llm.models import Call
from apps.llm.outbound import connections_kept
from apps.llm.services import connection_create
from apps.llm.streaming import stream_chat
from tests.llm_server import Reply, start_llm_server
from tests.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = [{"role": "user", "content": "Say hello to Ada"}]
STORY = "Mira lifts the lantern and the corridor fills with a pale green light."


@pytest.fixture(autouse=True)
def _close_the_recording_threads_connection():
    """The Call is saved in asgiref's thread for sync code; its database connection is closed there at the end."""
    yield
    asyncio.run(sync_to_async(connections.close_all)())


@pytest.fixture
def model():
    server = start_llm_server(keep_alive=True)
    server.on(lambda prompt: True, STORY)
    yield server
    server.stop()


@pytest.fixture
def connection(user, model):
    return connection_create(
        user=user, name="kept", base_url=model.url, model="m", api_key="sk-test-1234567890abcd"
    )  # fmt: skip


async def _asked(app, scope_type: str, messages: list[dict]) -> list[dict]:
    """What `app` sends for one ASGI call of `scope_type` that receives `messages`."""
    sent: list[dict] = []
    queue = list(messages)

    async def receive():
        return queue.pop(0)

    async def send(message):
        sent.append(message)

    await app({"type": scope_type}, receive, send)
    return sent


async def _serving() -> object:
    """The middleware, with one request passed through it on the running loop: the loop now serves."""

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})

    kept = connections_kept(app)
    assert (await _asked(kept, "http", []))[0]["status"] == 204
    return kept


async def _shutdown(kept) -> None:
    sent = await _asked(kept, "lifespan", [{"type": "lifespan.shutdown"}])
    assert sent == [{"type": "lifespan.shutdown.complete"}]


async def _reply(connection, messages=HELLO, *, stop_after: int | None = None) -> str:
    parts = []
    stream = stream_chat(connection, messages, purpose="chat", user_id=connection.user_id)
    async with contextlib.aclosing(stream):
        async for delta in stream:
            parts.append(delta)
            if stop_after is not None and len(parts) >= stop_after:
                break
    return "".join(parts)


def test_replies_on_a_serving_loop_share_one_connection_and_carry_no_cookie(connection, model):
    model.on(lambda prompt: True, Reply(STORY, headers={"Set-Cookie": "session=abc123; Path=/"}))

    async def go():
        kept = await _serving()
        replies = [await _reply(connection), await _reply(connection), await _reply(connection)]
        await _shutdown(kept)
        return replies

    assert asyncio.run(go()) == [STORY] * 3
    assert len(model.peers()) == 3 and len(set(model.peers())) == 1  # one TCP connection for the three
    assert all("Cookie" not in request["headers"] and "cookie" not in request["headers"] for request in model.requests)


def test_a_blocking_calls_loop_keeps_nothing(connection, model):
    """Each `asyncio.run` is a loop of its own, as a Celery task's call is: its connection closes with it."""
    assert asyncio.run(_reply(connection)) == STORY
    assert asyncio.run(_reply(connection)) == STORY
    assert len(set(model.peers())) == 2


def test_a_stream_stopped_early_closes_its_connection(connection, model):
    model.on("slowly", Reply(" ".join(["word"] * 200), tokens_per_second=50))

    async def go():
        kept = await _serving()
        stopped = await _reply(connection, [{"role": "user", "content": "Tell it slowly"}], stop_after=2)
        # The server learns of it at its next write: the model stops generating.
        gone = await asyncio.to_thread(
            wait_for, lambda: model.requests[0].get("client_gone"), timeout=5, what="the server saw the client go",
            every=0.02,
        )  # fmt: skip
        after = await _reply(connection)
        await _shutdown(kept)
        return stopped, gone, after

    stopped, gone, after = asyncio.run(go())
    assert stopped.split() == ["word", "word"] and gone
    assert after == STORY
    assert model.peers()[0] != model.peers()[1]  # the stopped stream's connection was not kept


def test_a_kept_connection_closed_by_the_server_is_retried_at_once_on_a_new_one(connection, model):
    model.on("again", Reply(drop=True), times=1)  # the server closes the kept connection as the request arrives

    async def go():
        kept = await _serving()
        first = await _reply(connection)
        second = await _reply(connection, [{"role": "user", "content": "Say it again"}])
        await _shutdown(kept)
        return first, second

    assert asyncio.run(go()) == (STORY, STORY)
    first, dropped, retried = model.peers()
    assert dropped == first and retried != first
    call = Call.objects.filter(user=connection.user).latest("id")
    assert call.status == Call.Status.OK and call.attempts == 2


def test_the_servers_shutdown_closes_the_kept_connection(connection, model):
    closed = []

    async def go():
        kept = await _serving()
        await _reply(connection)
        await _shutdown(kept)
        # A closed session opens a new connection for the next call: the old one is gone.
        kept = await _serving()
        closed.append(await _reply(connection))
        await _shutdown(kept)

    asyncio.run(go())
    assert closed == [STORY] and len(set(model.peers())) == 2


def test_the_lifespan_startup_is_answered(connection):
    async def app(scope, receive, send):  # never reached: the middleware answers the lifespan itself
        raise AssertionError(scope)

    sent = asyncio.run(_asked(connections_kept(app), "lifespan", [{"type": "lifespan.startup"},
                                                                  {"type": "lifespan.shutdown"}]))  # fmt: skip
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


def test_keeping_switched_off_opens_one_connection_a_call(connection, model, settings):
    settings.LOREKEEPER_LLM = {**settings.LOREKEEPER_LLM, "keepalive": 0}

    async def go():
        kept = await _serving()
        await _reply(connection)
        await _reply(connection)
        await _shutdown(kept)

    asyncio.run(go())
    assert len(set(model.peers())) == 2


def test_two_peoples_calls_to_one_server_never_share_a_connection(connection, model, other_user):
    """A hostile server answers a person and then sends a second answer, unasked, on the kept connection: another
    person's call to the same server gets its own answer, over its own connection."""
    model.on("A1", Reply(STORY, unasked="INJECTED BY THE SERVER"))
    theirs = connection_create(
        user=other_user, name="theirs", base_url=model.url, model="m", api_key="sk-their-1234567"
    )  # fmt: skip

    async def go():
        kept = await _serving()
        mine = await _reply(connection, [{"role": "user", "content": "A1"}])
        await asyncio.sleep(0.6)  # the unasked answer has arrived on the idle connection
        their = await _reply(theirs, [{"role": "user", "content": "B1"}])
        again = await _reply(theirs, [{"role": "user", "content": "B2"}])
        await _shutdown(kept)
        return mine, their, again

    assert asyncio.run(go()) == (STORY, STORY, STORY)
    prompts = [request["prompt"] for request in model.requests]
    assert prompts == ["A1", "B1", "B2"]  # the other person's requests reached the server
    a1, b1, b2 = model.peers()
    assert b1 != a1 and b2 == b1  # their own connection, kept for their next call


def test_a_new_connection_closed_before_the_answer_is_not_sent_again(connection, model):
    model.on(lambda prompt: True, Reply(drop=True))

    async def go():
        kept = await _serving()
        try:
            await _reply(connection)
        finally:
            await _shutdown(kept)

    with pytest.raises(LlmError, match="broke off before the answer began"):
        asyncio.run(go())
    assert len(model.requests) == 1  # the server may have done the work: it is not asked twice


def test_past_the_cap_the_least_recently_used_session_is_closed(connection, model, user, monkeypatch):
    monkeypatch.setattr(outbound, "KEPT_SESSIONS", 2)
    second, third = (
        connection_create(user=user, name=name, base_url=model.url, model="m", api_key="sk-test-1234567890abcd")
        for name in ("second", "third")
    )

    async def go():
        kept = await _serving()
        for each in (connection, second, third, second, connection):
            await _reply(each)
        await _shutdown(kept)

    asyncio.run(go())
    first, other, last, other_again, first_again = model.peers()
    assert other_again == other  # kept: used since
    assert first_again != first  # the least recently used when the third came: closed
    assert len({first, other, last, first_again}) == 4


def test_after_the_shutdown_nothing_more_is_kept(connection, model):
    async def go():
        kept = await _serving()
        await _shutdown(kept)
        await _asked(kept, "http", [])  # a request that arrives late, through the middleware
        await _reply(connection)
        await _reply(connection)

    asyncio.run(go())
    assert len(set(model.peers())) == 2
