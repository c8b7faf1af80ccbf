"""A bare ASGI application for the web worker's tests (tests/common/test_worker.py): it answers its pid, and on
request keeps its event loop busy in long turns, or blocks it for good; or holds the connection open, as a streamed
reply does, at most LOOP_APP_HOLDS at once in a process (then 503, as a process at its cap of streams answers), and
says it is full then (apps/common/capacity.py)."""

from __future__ import annotations

import asyncio
import os
import time

from apps.common.capacity import full_check_add

_tasks: set[asyncio.Task] = set()
_held: set[int] = set()
HOLDS = int(os.environ.get("LOOP_APP_HOLDS") or 0)
full_check_add(lambda: len(_held) >= HOLDS > 0)


async def _busy(seconds: float, turn: float) -> None:
    """Turns of `turn` seconds of blocking work, the loop free for a moment between them: busy, but turning."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(turn)
        await asyncio.sleep(0)


async def app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    body = str(os.getpid()).encode()
    if scope["path"] == "/hold":
        return await _hold(receive, send, body)
    if scope["path"] == "/busy":
        task = asyncio.get_running_loop().create_task(_busy(seconds=14, turn=1.0))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
    if scope["path"] == "/hang":
        time.sleep(3600)  # after the answer: the loop never turns again


async def _hold(receive, send, body: bytes) -> None:
    if len(_held) >= HOLDS:
        headers = [(b"content-type", b"text/plain"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    mark = id(send)
    _held.add(mark)
    try:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body + b"\n", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
    finally:
        _held.discard(mark)
