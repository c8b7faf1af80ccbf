"""Answers given by the ASGI wrappers of config/asgi.py (admission's 503, the upload limit's 413, the slow body's
408), outside Django's middleware: they carry the CORS headers CorsMiddleware would have added, so that a page on an
allowed origin (the SillyTavern extension, a front end of the gateway) reads the status and its Retry-After, where a
browser would otherwise report only a failed cross-origin request."""

from __future__ import annotations

import io

from corsheaders.middleware import CorsMiddleware
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse

_CORS = CorsMiddleware(lambda request: None)  # its header rules only; it wraps nothing here


def answer_headers(scope: dict, response: HttpResponse) -> list[tuple[bytes, bytes]]:
    """The response's headers for `http.response.start`, CORS's added as for any answer to the request `scope`."""
    request = ASGIRequest({**scope, "method": scope.get("method") or "GET"}, io.BytesIO())  # a scope may lack one
    _CORS.add_response_headers(request, response)
    return [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in response.items()]
