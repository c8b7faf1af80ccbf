"""The answer to an error no view handled. The database being unreachable (restarting, failing over, out of
connections) is not a bug in the request: it is a 503 with Retry-After, so clients wait and try again. A request is
one transaction, so it was applied whole or not at all; a retried write carrying the same Idempotency-Key is never
applied twice. Anything else (a deadlock or a timeout included) is a 500."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing

import psycopg
from django.core.handlers.asgi import ASGIRequest
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.templatetags.static import static

log = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5
UNAVAILABLE = (
    "The database is unavailable for a moment (restarting?): the request was not completed. Try again shortly; "
    "a write sent again with the same Idempotency-Key is never applied twice."
)
# SQLSTATEs of a server that is going away or not taking sessions: admin_shutdown, crash_shutdown, cannot_connect_now,
# too_many_connections (class 08, connection exceptions, is matched by its prefix).
_GOING_AWAY = {"57P01", "57P02", "57P03", "53300"}


def database_down(exc: BaseException | None) -> bool:
    """The database could not be reached or dropped the session, as opposed to refusing the statement (a deadlock, a
    timeout, a serialisation failure are OperationalErrors too, but the database is there: those are bugs or load)."""
    if isinstance(exc, InterfaceError | psycopg.InterfaceError):
        return True
    if not isinstance(exc, OperationalError | psycopg.OperationalError):
        return False
    # Django wraps psycopg's error (its __cause__); psycopg's own reaches here from connections made outside Django.
    original = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc
    sqlstate = getattr(original, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _GOING_AWAY


def server_error(request, *args, **kwargs) -> HttpResponse:
    exc = sys.exc_info()[1]
    api = request.path.startswith("/api/")
    if database_down(exc):
        if api:
            response = JsonResponse(
                {"message": UNAVAILABLE, "extra": {"retry_after": RETRY_AFTER_SECONDS}}, status=503
            )
        else:
            response = HttpResponse(plain_page("Back in a moment", UNAVAILABLE), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    message = "Something went wrong on our side; it has been logged."
    if api:
        return JsonResponse({"message": message, "extra": {}}, status=500)
    message += " Nothing you wrote was lost: what was saved before stays saved. Try again in a moment."
    return HttpResponse(plain_page("Server error", message), status=500)


def may_close(request) -> bool:
    """Whether an answer may ask for its connection to be closed (`Connection: close`): under ASGI (uvicorn, as
    served) it may; a WSGI server refuses that hop-by-hop header from an application and fails the request (wsgiref:
    `manage.py runserver` and Django's live test server). `request`: Django's or REST framework's."""
    return isinstance(getattr(request, "_request", request), ASGIRequest)


class EventStreamResponse(StreamingHttpResponse):
    """Server-sent events, passed on at once by a proxy in front. `on_close` is called when the answer is closed,
    whether its stream was sent whole, in part or not at all (its client left while the view made it:
    apps/common/handler.py closes such an answer too), so that what the view opened for the stream and the stream
    itself did not end (a reply never relayed) ends then, not when a lease runs out."""

    def __init__(self, stream: AsyncGenerator[bytes, None], *, on_close: Callable[[], None]) -> None:
        super().__init__(stream, content_type="text/event-stream")
        self.stream = stream
        self.on_close = on_close
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # Django's ASGI handler closes what it iterates, not the generators that wraps: the stream given is closed
        # with it, at once and in the request's context, so that one left mid-way ends its own way (keeping what
        # arrived), not when it is collected. Its parts are bytes already.
        async with aclosing(self.stream) as stream:
            async for part in stream:
                yield part

    def close(self) -> None:
        try:
            self.on_close()
        except Exception:  # the database gone, say: what the stream opened then ends by its own means (a lease)
            log.exception("ending what a closed stream left open failed")
        finally:
            super().close()


def _static(path: str) -> str:
    try:
        return static(path)
    except ValueError:  # a manifest storage without its manifest (collectstatic not run): the plain look
        return ""


def plain_page(title: str, text: str) -> str:
    """A page of one heading and one paragraph in the site's look, for answers given where templates may not be
    at hand (no template engine and no database: this page must render when either is the problem)."""
    css, icon = _static("css/app.css"), _static("img/favicon.svg")
    head = f'<link rel="stylesheet" href="{css}">' if css else ""
    head += f'<link rel="icon" href="{icon}" type="image/svg+xml">' if icon else ""
    return (
        f'<!doctype html><html lang=en><meta charset=utf-8><meta name="viewport" content="width=device-width, '
        f'initial-scale=1"><title>{title} · Lorekeeper</title>{head}'
        f'<body><header class="topbar"><a class="brand" href="/">Lorekeeper</a></header>'
        f'<main><section class="card error-page"><h1>{title}</h1><p>{text}</p><p><a href="/">Back to your chats</a>'
        f"</p></section></main></body></html>"
    )
