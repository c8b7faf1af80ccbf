"""The ASGI handler (apps/common/handler.py): the middleware and the view run in the request's thread, handed over
once, and still do all they did. Driven as uvicorn drives the application: ASGI messages on a real event loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from asgiref import sync
from django.core.handlers.asgi import ASGIHandler

from apps.common.handler import OneHandOverASGIHandler


async def _served(app, path: str, headers=(), *, gone_after: float | None = None) -> tuple[int, dict, bytes]:
    """One GET as uvicorn hands it to the application; `gone_after`: the client disconnects after so many seconds."""
    sent: list[dict] = []
    asked: list[bool] = []

    async def receive():
        if asked:  # after the body: the client stays until the answer is sent, or leaves
            await asyncio.sleep(3600 if gone_after is None else gone_after)
            return {"type": "http.disconnect"}
        asked.append(True)
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"testserver"), *headers], "server": ("testserver", 80), "client": ("127.0.0.1", 9),
    }  # fmt: skip
    await app(scope, receive, send)
    if not sent:
        return 0, {}, b""
    start = sent[0]
    body = b"".join(message.get("body", b"") for message in sent[1:])
    return start["status"], {name.lower(): value for name, value in start["headers"]}, body


def _request(app, path: str, headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, dict[bytes, bytes], bytes]:
    return asyncio.run(_served(app, path, headers))


def _hand_overs(app, path: str, monkeypatch) -> int:
    """How many times one request is handed from the event loop to a thread."""
    calls = []
    original = sync.SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        calls.append(self.func)
        return await original(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(sync.SyncToAsync, "__call__", counted)
        _request(app, path)
    return len(calls)


def test_a_request_is_handed_to_its_thread_once(monkeypatch):
    ours = _hand_overs(OneHandOverASGIHandler(), "/api/v1/chats/", monkeypatch)
    djangos = _hand_overs(ASGIHandler(), "/api/v1/chats/", monkeypatch)
    # The request_started signal's receivers, the middleware with the view, the response's close.
    assert ours == 3
    assert djangos >= 10, djangos  # Django's own handler: a hand-over each way for each middleware's hooks


def test_the_middleware_still_answers_as_before():
    app = OneHandOverASGIHandler()
    status, headers, body = _request(app, "/api/v1/chats/")
    assert status == 401
    assert json.loads(body)["detail"] == "Authentication credentials were not provided."
    assert headers[b"x-frame-options"] == b"DENY"
    assert headers[b"vary"]  # Cors and the session vary the answer

    status, headers, body = _request(app, "/accounts/login/", [(b"hx-request", b"true")])
    assert status == 200
    assert b"script-src" in headers[b"content-security-policy"]  # apps/common/csp.py
    assert b"csrftoken=" in headers[b"set-cookie"]
    assert b'name="csrfmiddlewaretoken"' in body


# WhiteNoise answers with a file read synchronously, which Django's ASGI handler reads in a thread and warns of, as
# it did with Django's own handler.
@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators")
def test_a_static_file_is_served_by_whitenoise():
    status, headers, body = _request(OneHandOverASGIHandler(), "/static/vendor/htmx-2.0.11.min.js")
    assert status == 200, body[:200]
    assert len(body) > 1000


def _threads_seen(app) -> list[threading.Thread]:
    """The threads that run `app`'s requests, one entry a request (the objects: an ended thread's ident may be
    given to the next)."""
    seen: list[threading.Thread] = []
    answer = app.get_response

    def get_response(request):
        seen.append(threading.current_thread())
        return answer(request)

    app.get_response = get_response
    return seen


def test_requests_one_after_another_are_served_by_one_thread_not_one_each():
    app = OneHandOverASGIHandler()
    seen = _threads_seen(app)

    async def three():
        for _ in range(3):
            assert (await _served(app, "/api/v1/chats/"))[0] == 401
            await asyncio.sleep(0.05)  # the thread is given back once idle

    asyncio.run(three())
    assert len(seen) == 3 and len(set(seen)) == 1
    assert threading.main_thread() not in seen


def test_a_request_at_work_keeps_its_thread_and_the_next_gets_another():
    app = OneHandOverASGIHandler()
    seen = _threads_seen(app)
    answer, release, calls = app.get_response, threading.Event(), []

    def slow_first(request):
        calls.append(request)
        if len(calls) == 1:
            release.wait(30)
        return answer(request)

    app.get_response = slow_first

    async def scenario():
        first = asyncio.create_task(_served(app, "/api/v1/chats/", gone_after=0.2))
        await asyncio.sleep(0.4)  # its client has gone; its thread is still at work
        served = await asyncio.wait_for(_served(app, "/api/v1/chats/"), 10)
        release.set()
        gone = await asyncio.wait_for(first, 10)
        await asyncio.sleep(0.2)
        return gone, served, len(app.threads.idle)

    gone, served, idle = asyncio.run(scenario())
    assert served[0] == 401 and gone[0] == 0  # the second answered, not behind the first, which answered nobody
    assert len(seen) == 2 and seen[0] is not seen[1]
    assert idle == 2  # both kept for the next requests


def test_an_answer_made_after_its_client_left_is_closed_unsent():
    """Django's handler cancels a request whose client left, and drops the answer the view goes on to make without
    closing it: what the answer opened (a reply prepared to stream) would stay open. Here it is closed."""
    app = OneHandOverASGIHandler()
    closed: list[bool] = []
    answer = app.get_response

    def get_response(request):
        time.sleep(0.3)  # the view still at work when the client leaves
        response = answer(request)
        response.close = lambda: closed.append(True)
        return response

    app.get_response = get_response
    status, _, _ = asyncio.run(_served(app, "/api/v1/chats/", gone_after=0.05))
    assert status == 0  # nothing was sent
    assert closed == [True]
