"""Requests queue for a place before their work begins, so that none times out inside the database pool
(config/asgi.py wraps the application in `admission`).

A web process serves many requests at once on one event loop, and each runs its database work in a thread with a
connection from a pool of `DATABASE_POOL` (config/asgi.py). More requests than connections used to wait inside the
pool, and past its timeout answered 503 "database unavailable": a worker that had just started, given 36 clients at
once, answered dozens of those (bench/chat.py's warm-up). Here, with settings.LOREKEEPER_ADMISSION:
- at most `places` requests of a process do their work at once (by default two fewer than the pool's connections:
  those two serve the streams' own brief writes, which are not counted);
- a request takes its place once its body has arrived (a slow client holds no place while it sends), and gives it
  back when its answer starts (a streamed reply then waits on the model without one);
- a request that found no place within `wait` seconds is answered 503 with Retry-After, saying the server is busy,
  and nothing of it was done.
"""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from apps.common.asgi_answers import answer_headers
from apps.common.views import RETRY_AFTER_SECONDS, plain_page

MESSAGE = "The server is busy: the request was not started. Try again in a few seconds."


class _NoPlace(Exception):
    """No place came free within the wait: raised out of the application's `receive`, before any of its work."""


def busy_response(path: str) -> HttpResponse:
    if path.startswith("/api/"):
        response = JsonResponse({"message": MESSAGE, "extra": {"retry_after": RETRY_AFTER_SECONDS}}, status=503)
    else:
        response = HttpResponse(plain_page("Busy", MESSAGE), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def admission(app):
    """ASGI middleware: a place for each request's work, or 503 with Retry-After (module docstring)."""
    places: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}  # one event loop a worker; one per loop anyway

    async def admitted(scope, receive, send):
        conf = settings.LOREKEEPER_ADMISSION
        if scope["type"] != "http" or not conf["places"]:
            return await app(scope, receive, send)
        loop = asyncio.get_running_loop()
        semaphore = places.setdefault(loop, asyncio.Semaphore(conf["places"]))
        state = {"held": False, "started": False}

        def release() -> None:
            if state["held"]:
                state["held"] = False
                semaphore.release()

        async def receive_admitted():
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False) and not state["started"]:
                state["started"] = True  # the body is whole: its work begins once a place is free
                try:
                    async with asyncio.timeout(conf["wait"]):
                        await semaphore.acquire()
                except TimeoutError:
                    raise _NoPlace from None
                state["held"] = True
            return message

        async def send_released(message):
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await app(scope, receive_admitted, send_released)
        except _NoPlace:
            response = busy_response(scope.get("path", ""))
            await send({"type": "http.response.start", "status": 503, "headers": answer_headers(scope, response)})
            await send({"type": "http.response.body", "body": response.content})
        finally:
            release()

    return admitted
