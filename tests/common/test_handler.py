"""The ASGI handler (apps/common/handler.py): the middleware and the view run in the request's thread, handed over
once, and still do all they did. Driven as uvicorn drives the application: ASGI messages on a real event loop."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref import sync
from django.core.handlers.asgi import ASGIHandler

from apps.common.handler import OneHandOverASGIHandler


def _request(app, path: str, headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, dict[bytes, bytes], bytes]:
    async def call():
        sent: list[dict] = []
        asked: list[bool] = []

        async def receive():
            if asked:  # after the body: the client stays until the answer is sent
                await asyncio.sleep(3600)
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
        start = sent[0]
        body = b"".join(message.get("body", b"") for message in sent[1:])
        return start["status"], {name.lower(): value for name, value in start["headers"]}, body

    return asyncio.run(call())


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
