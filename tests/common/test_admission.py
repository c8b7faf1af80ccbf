"""Admission (apps/common/admission.py): requests past a process's places queue, then get a 503 with Retry-After,
never a wait inside the database pool; a slow body holds no place, and a streamed answer gives its place back when
it starts. Driven as uvicorn drives the application: ASGI messages on a real event loop."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.test import override_settings

from apps.common.admission import admission
from apps.common.uploads import limit_asgi_body


class Held:
    """An application whose answers wait until the test lets them go; `streamed`: the answer starts at once and its
    body waits."""

    def __init__(self, *, streamed: bool = False) -> None:
        self.go = asyncio.Event()
        self.working = 0
        self.streamed = streamed

    async def __call__(self, scope, receive, send):
        while (await receive()).get("more_body"):  # the body, as Django reads it before any work
            pass
        self.working += 1
        try:
            if self.streamed:
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await self.go.wait()
                await send({"type": "http.response.body", "body": b"streamed"})
            else:
                await self.go.wait()
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": b"done"})
        finally:
            self.working -= 1


async def call(
    app, *, path: str = "/api/v1/chats/", chunks: list[bytes] | None = None, gap: float = 0.0, origin: str = ""
):
    """One request through `app`: its status, headers and body."""
    chunks = chunks or [b""]
    queue = [
        {"type": "http.request", "body": chunk, "more_body": n < len(chunks) - 1} for n, chunk in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive():
        if queue:
            if gap and len(queue) < len(chunks):
                await asyncio.sleep(gap)
            return queue.pop(0)
        await asyncio.Event().wait()  # the client stays

    async def send(message):
        sent.append(message)

    headers = [(b"origin", origin.encode())] if origin else []
    await app({"type": "http", "path": path, "method": "POST", "headers": headers}, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


@override_settings(LOREKEEPER_ADMISSION={"places": 1, "wait": 0.3})
def test_a_request_past_the_places_waits_then_is_told_the_server_is_busy():
    async def scenario():
        inner = Held()
        app = admission(inner)
        first = asyncio.create_task(call(app))
        await asyncio.sleep(0.05)
        status, headers, body = await call(app)  # the one place is taken for longer than the wait
        assert status == 503
        assert headers[b"retry-after"] == b"5"
        assert "busy" in json.loads(body)["message"]
        assert inner.working == 1  # the refused request did no work
        queued = asyncio.create_task(call(app))  # waits for the place, and gets it when the first ends
        await asyncio.sleep(0.05)
        inner.go.set()
        assert (await first)[0] == 200
        assert (await queued)[0] == 200

    asyncio.run(asyncio.wait_for(scenario(), 10))  # a regression fails, never hangs


@override_settings(LOREKEEPER_ADMISSION={"places": 1, "wait": 0.3}, CORS_ALLOWED_ORIGINS=["http://127.0.0.1:8000"])
def test_a_page_on_an_allowed_origin_can_read_that_the_server_is_busy_and_when_to_come_back():
    """The 503 is given outside Django's middleware, with the CORS headers it would have added: the extension then
    reads "busy" and Retry-After, not a failed cross-origin request. Another origin gets none."""

    async def scenario():
        inner = Held()
        app = admission(inner)
        first = asyncio.create_task(call(app))
        await asyncio.sleep(0.05)
        status, headers, _ = await call(app, origin="http://127.0.0.1:8000")
        assert status == 503 and headers[b"access-control-allow-origin"] == b"http://127.0.0.1:8000"
        assert b"retry-after" in headers[b"access-control-expose-headers"].lower().split(b", ")
        status, headers, _ = await call(app, origin="http://elsewhere.example")
        assert status == 503 and b"access-control-allow-origin" not in headers
        inner.go.set()
        await first

    asyncio.run(asyncio.wait_for(scenario(), 10))  # a regression fails, never hangs


@override_settings(LOREKEEPER_ADMISSION={"places": 1, "wait": 0.3})
def test_a_page_past_the_places_gets_a_page_saying_so():
    async def scenario():
        inner = Held()
        app = admission(inner)
        first = asyncio.create_task(call(app, path="/chats/"))
        await asyncio.sleep(0.05)
        status, headers, body = await call(app, path="/chats/")
        assert status == 503 and headers[b"retry-after"] == b"5"
        assert b"<html" in body.lower() and b"busy" in body
        inner.go.set()
        await first

    asyncio.run(asyncio.wait_for(scenario(), 10))  # a regression fails, never hangs


@override_settings(LOREKEEPER_ADMISSION={"places": 1, "wait": 0.3})
def test_a_slow_body_holds_no_place_while_it_arrives():
    async def scenario():
        inner = Held()
        app = admission(inner)
        slow = asyncio.create_task(call(app, chunks=[b"a"] * 8, gap=0.1))  # 0.8 s to send its body
        await asyncio.sleep(0.05)
        quick = asyncio.create_task(call(app))
        await asyncio.sleep(0.1)
        assert inner.working == 1  # the quick one took the place: the slow one is still sending
        inner.go.set()
        assert (await quick)[0] == 200
        assert (await slow)[0] == 200

    asyncio.run(asyncio.wait_for(scenario(), 10))  # a regression fails, never hangs


@override_settings(LOREKEEPER_ADMISSION={"places": 1, "wait": 0.3})
def test_a_streamed_answer_gives_its_place_back_when_it_starts():
    async def scenario():
        go = asyncio.Event()

        async def inner(scope, receive, send):
            await receive()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            if scope["path"].endswith("/generate"):  # a reply streaming from the model for as long as it takes
                await go.wait()
            await send({"type": "http.response.body", "body": b"ok"})

        app = admission(inner)
        stream = asyncio.create_task(call(app, path="/api/v1/chats/1/generate"))
        await asyncio.sleep(0.05)
        assert not stream.done()
        assert (await call(app))[0] == 200  # the one place was given back when the stream's answer began
        go.set()
        assert (await stream)[0] == 200

    asyncio.run(asyncio.wait_for(scenario(), 10))  # a regression fails, never hangs


@pytest.mark.parametrize("places", [0])
def test_without_places_every_request_goes_straight_through(places):
    with override_settings(LOREKEEPER_ADMISSION={"places": places, "wait": 0.01}):

        async def scenario():
            inner = Held()
            app = admission(inner)
            tasks = [asyncio.create_task(call(app)) for _ in range(5)]
            await asyncio.sleep(0.05)
            assert inner.working == 5
            inner.go.set()
            assert [(await task)[0] for task in tasks] == [200] * 5

        asyncio.run(asyncio.wait_for(scenario(), 10))  # a regression fails, never hangs


@override_settings(LOREKEEPER_MAX_UPLOAD_BYTES=10, CORS_ALLOWED_ORIGINS=["http://127.0.0.1:8000"])
def test_a_body_over_the_upload_limit_is_refused_with_the_cors_headers_an_allowed_page_needs_to_read_it():
    """The upload limit's 413 is given outside Django's middleware too (apps/common/uploads.py)."""

    async def scenario():
        async def reads_its_body(scope, receive, send):  # as Django: stops at the disconnect it is told of
            while (message := await receive())["type"] == "http.request" and message.get("more_body"):
                pass

        app = limit_asgi_body(reads_its_body)
        status, headers, body = await call(app, chunks=[b"x" * 11], origin="http://127.0.0.1:8000")
        assert status == 413 and headers[b"access-control-allow-origin"] == b"http://127.0.0.1:8000"
        assert headers[b"content-type"] == b"application/json" and json.loads(body)["message"]

    asyncio.run(asyncio.wait_for(scenario(), 10))
