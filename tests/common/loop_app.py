"""A bare ASGI application for the web worker's tests (tests/common/test_worker.py): it answers its pid, and on
request keeps its event loop busy in long turns, or blocks it for good."""

from __future__ import annotations

import asyncio
import os
import time

_tasks: set[asyncio.Task] = set()


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
    if scope["path"] == "/busy":
        task = asyncio.get_running_loop().create_task(_busy(seconds=14, turn=1.0))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
    if scope["path"] == "/hang":
        time.sleep(3600)  # after the answer: the loop never turns again
