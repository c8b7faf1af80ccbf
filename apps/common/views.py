"""The answer to an error no view handled. The database being unreachable (restarting, failing over, out of
connections) is not a bug in the request: it is a 503 with Retry-After, so clients wait and try again — and
nothing was written, since every write is one transaction. Anything else is a 500."""

from __future__ import annotations

import sys

import psycopg
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse

RETRY_AFTER_SECONDS = 5
UNAVAILABLE = "The database is unavailable for a moment (restarting?): nothing was saved. Try again shortly."


def database_down(exc: BaseException | None) -> bool:
    # Django's wrappers, and psycopg's own errors when they reach here unwrapped (a connection made outside Django).
    return isinstance(exc, OperationalError | InterfaceError | psycopg.OperationalError | psycopg.InterfaceError)


def server_error(request, *args, **kwargs) -> HttpResponse:
    exc = sys.exc_info()[1]
    api = request.path.startswith("/api/")
    if database_down(exc):
        if api:
            response = JsonResponse(
                {"message": UNAVAILABLE, "extra": {"retry_after": RETRY_AFTER_SECONDS}}, status=503
            )
        else:
            response = HttpResponse(_page("Back in a moment", UNAVAILABLE), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    message = "Something went wrong on our side; it has been logged."
    if api:
        return JsonResponse({"message": message, "extra": {}}, status=500)
    return HttpResponse(_page("Server error", message), status=500)


def _page(title: str, text: str) -> str:
    # No template engine and no database: this page must render when either is the problem.
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{title} · Lorekeeper</title>"
        f'<body style="font-family:sans-serif;max-width:40rem;margin:4rem auto"><h1>{title}</h1><p>{text}</p>'
    )
