"""Django's ASGI handler with the middleware and the view run in the request's thread, handed over once
(config/asgi.py).

Django's own ASGI handler runs its middleware asynchronously wherever a middleware can, and every view here is
synchronous (DRF and the pages; a streamed reply is a synchronous view answering an async iterator). Each middleware
built on `MiddlewareMixin` then hands its `process_request` and `process_response` to a thread and back, and a
middleware that is synchronous only (WhiteNoise's) turns the chain back again: 17 hand-overs between the event loop
and a thread for one API request (tests/common/test_handler.py counts them). Each waits for the other side to wake,
and the event loop, busy relaying the streams of others' replies, wakes last. An API request answered 401 took
3.7–5.4 ms at the client through gunicorn's worker, and 2.4–2.6 ms with this handler.

Here the middleware is loaded synchronously, as under WSGI, and the whole of it runs with the view in the request's
thread: three hand-overs, with the request_started signal before and the response's close after. What runs on the
event loop is unchanged: reading the body, the signals, sending the answer, and a streamed answer's async iterator,
read as it is sent. An async view would still run, on the event loop, handed back from the thread, as Django's
WSGI handler runs one.

Django's handler also starts a thread for every request (a `ThreadSensitiveContext` of its own, with a new
single-thread executor) and ends it after: a thread started and joined on the event loop for each request. Here each
request takes a thread from the process's idle ones (`_RequestThreads`), as a WSGI server's threads serve one request
after another, and gives it back once it is idle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler

T = TypeVar("T")
log = logging.getLogger(__name__)
ARRIVED = "lorekeeper.arrived"  # the scope's key for when the request reached the application (time.perf_counter)
LEFT = "lorekeeper_left"  # a request's attribute here: an asyncio.Event set when its client leaves


class _RequestThreads:
    """A web process's request threads: a request takes an idle one, or a new one when none is idle. Given back, a
    thread waits for the next request, up to `kept` idle ones; one more ends."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.idle: list[ThreadPoolExecutor] = []

    def take(self) -> ThreadPoolExecutor:
        return self.idle.pop() if self.idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        """Kept for the next request once its thread is idle, so that no request waits behind work its last request
        left queued there (a shielded save that outlived a request its client left). Called on the event loop."""
        loop = asyncio.get_running_loop()

        def idle(_) -> None:
            try:
                loop.call_soon_threadsafe(self._idle, executor)
            except RuntimeError:  # the loop has ended (the process is stopping)
                executor.shutdown(wait=False)

        executor.submit(int).add_done_callback(idle)

    def _idle(self, executor: ThreadPoolExecutor) -> None:
        if len(self.idle) < self.kept:
            self.idle.append(executor)
        else:
            executor.shutdown(wait=False)


class OneHandOverASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.threads = _RequestThreads(kept=32)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        scope[ARRIVED] = time.perf_counter()  # before its body is read: where a view's timings can start
        executor = self.threads.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.threads.give_back(executor)

    async def get_response_async(self, request):
        """The view's answer, run as Django's own handler runs a synchronous view: in the thread of this request's
        context (its own, taken in __call__ above), where its database connection lives.

        When the client leaves while the view runs, Django's handler cancels the request. The cancellation reaches
        what the view awaits of the event loop (asgiref cancels it: a reply the view waits for whole is stopped),
        but not the view's own thread, which goes on, and the answer it then makes is never sent nor closed. It is
        closed here once made, in the request's thread as a sent one is, so that what it opened ends (a reply
        prepared to stream: apps/common/views.py's EventStreamResponse)."""
        made: Future = Future()
        left = asyncio.Event()
        setattr(request, LEFT, left)

        def respond(request):
            try:
                response = self.get_response(request)
            except BaseException as error:  # the reply it waited for cancelled, say: no answer to close
                made.set_exception(error)
                raise
            made.set_result(response)
            return response

        try:
            return await sync_to_async(respond, thread_sensitive=True)(request)
        except asyncio.CancelledError:
            left.set()  # for what the view starts on the event loop from now on (unless_left)
            await _closed_unsent(made)
            raise


async def _closed_unsent(made: Future) -> None:
    """Close the answer a view makes after its request was cancelled, once it is made."""
    try:
        response = await asyncio.wrap_future(made)
    except BaseException:  # the view failed or was cancelled (no answer), or the server is stopping
        return
    try:
        await sync_to_async(response.close, thread_sensitive=True)()
    except Exception:  # the client has gone: logged, never raised in place of the cancellation
        log.exception("closing an answer made after its client left failed")


def client_left(request) -> asyncio.Event | None:
    """The event set when the client of `request` (Django's or REST framework's) leaves; None outside this handler
    (WSGI, a test's client)."""
    return getattr(getattr(request, "_request", request), LEFT, None)


async def unless_left(awaitable: Awaitable[T], left: asyncio.Event | None) -> T:
    """`awaitable`'s result, cancelled when the client leaves (`left`, client_left): asgiref cancels what a view
    awaits on the event loop when its request is cancelled, but only what had begun then; what the view begins
    after its client left (a reply it waits for whole, once prepared) is cancelled here."""
    task = asyncio.ensure_future(awaitable)
    if left is not None:
        leaving = asyncio.ensure_future(left.wait())
        leaving.add_done_callback(lambda _: task.cancel())
        task.add_done_callback(lambda _: leaving.cancel())
    return await task  # cancelled itself, it cancels the task too


def asgi_application() -> OneHandOverASGIHandler:
    """`django.core.asgi.get_asgi_application`, with the handler above."""
    django.setup(set_prefix=False)
    return OneHandOverASGIHandler()
