"""Request bodies refused by their size before they are read, not after they were spooled to disk.

A multipart upload is written to a temporary file while Django parses it; a 413 decided afterwards still cost the
disk and the time. Three places stop it early:
- `UploadLimitMiddleware` refuses a request whose Content-Length is over LOREKEEPER_MAX_UPLOAD_BYTES before
  anything reads the body (WSGI servers, and most clients, send Content-Length);
- `LimitedUploadHandler`, the first of FILE_UPLOAD_HANDLERS, counts the bytes of uploaded files as the parser
  reads them and stops at LOREKEEPER_MAX_IMPORT_BYTES, whatever the headers said;
- `limit_asgi_body` (config/asgi.py) stops reading a body without Content-Length at the limit under ASGI, where
  Django would otherwise read the whole body before any middleware runs.
Each answers 413 with a message, as JSON under /api/, and in OpenAI's error shape under /v1/.
"""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpResponse, JsonResponse

from apps.common.asgi_answers import answer_headers
from apps.common.exceptions import ApplicationError
from apps.common.views import plain_page

OPENAI_PATHS = "/v1/"  # the OpenAI-compatible gateway (apps/gateway), whose clients read OpenAI's error shape


def _megabytes(limit: int) -> str:
    return f"{limit / (1024 * 1024):g} MB"


class UploadTooLarge(ApplicationError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"The upload is larger than {_megabytes(limit)}.", {"max_bytes": limit}, status=413)


def too_large_response(path: str, limit: int) -> HttpResponse:
    error = UploadTooLarge(limit)
    if path.startswith("/api/"):
        return JsonResponse({"message": error.message, "extra": error.extra}, status=413)
    if path.startswith(OPENAI_PATHS):
        body = {"message": error.message, "type": "invalid_request_error", "param": None, "code": "request_too_large"}
        return JsonResponse({"error": body}, status=413)
    return HttpResponse(plain_page("Too large", f"{error.message} Go back and choose a smaller file."), status=413)


class LimitedUploadHandler(FileUploadHandler):
    """Counts uploaded file bytes across the request and stops the parser past the limit."""

    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > settings.LOREKEEPER_MAX_IMPORT_BYTES:
            raise UploadTooLarge(settings.LOREKEEPER_MAX_IMPORT_BYTES)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler stores the file


class UploadLimitMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.LOREKEEPER_MAX_UPLOAD_BYTES:
            return too_large_response(request.path, settings.LOREKEEPER_MAX_UPLOAD_BYTES)
        return self.get_response(request)

    def process_exception(self, request, exception) -> HttpResponse | None:
        """The handler's refusal, raised where a page's form read request.FILES (the API's handler answers it
        itself)."""
        if isinstance(exception, UploadTooLarge):
            return too_large_response(request.path, settings.LOREKEEPER_MAX_IMPORT_BYTES)
        return None


def limit_asgi_body(app):
    """ASGI middleware: 413 for a body over LOREKEEPER_MAX_UPLOAD_BYTES, by its Content-Length or, without one, as
    soon as that many bytes have arrived (the app is told the client went away, and reads no more)."""

    async def limited(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        limit = settings.LOREKEEPER_MAX_UPLOAD_BYTES
        headers = dict(scope.get("headers") or [])
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            declared = 0
        state = {"received": 0, "over": declared > limit}

        async def counted():
            if state["over"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["over"] = True
                    return {"type": "http.disconnect"}
            return message

        if not state["over"]:
            await app(scope, counted, send)
        if state["over"]:
            response = too_large_response(scope.get("path", ""), limit)
            await send({"type": "http.response.start", "status": 413, "headers": answer_headers(scope, response)})
            await send({"type": "http.response.body", "body": response.content})

    return limited
