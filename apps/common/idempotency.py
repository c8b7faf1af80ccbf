"""`Idempotency-Key` on writes: a retried request answers the first answer again and applies nothing, even when
that first answer was lost on the wire (the answer is stored in the same transaction as the write)."""

from __future__ import annotations

import functools
import hashlib
import json

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from apps.common.exceptions import ApplicationError
from apps.common.models import IdempotencyRecord
from apps.common.streams import spool_body

MAX_KEY_LENGTH = 200
REPLAYED_HEADERS = ("ETag", "Location")


def _fingerprint(view, request) -> str:
    """Method, path, If-Match and body. A view that streams its body (`streamed_body = True`) is fingerprinted by
    the SHA-256 of the raw bytes, which are spooled for the view to read afterwards."""
    streamed = getattr(view, "streamed_body", False) and not request.content_type.startswith("multipart/")
    data = spool_body(request, limit=settings.LOREKEEPER_MAX_IMPORT_BYTES)[1] if streamed else request.data
    if hasattr(data, "lists"):  # a QueryDict (forms, multipart): uploads count by name and size
        data = {
            key: [f"{v.name}:{v.size}" if isinstance(v, UploadedFile) else v for v in values]
            for key, values in data.lists()
        }
    files = {} if streamed else {key: f"{upload.name}:{upload.size}" for key, upload in request.FILES.items()}
    body = json.dumps(
        {"data": data, "files": files, "if_match": request.headers.get("If-Match")}, sort_keys=True, default=str
    )
    return hashlib.sha256(f"{request.method} {request.get_full_path()} {body}".encode()).hexdigest()


def idempotency_lock(user_id: int, key: str) -> None:
    """Serialise requests carrying the same key until the transaction ends, so two concurrent retries cannot both
    apply."""
    digest = hashlib.sha256(f"{user_id}:{key}".encode()).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest[:8], "big", signed=True)])


def idempotent(method):
    """Decorate an APIView write method."""

    @functools.wraps(method)
    def wrapper(self, request, *args, **kwargs):
        key = request.headers.get("Idempotency-Key", "").strip()
        if not key:
            return method(self, request, *args, **kwargs)
        if len(key) > MAX_KEY_LENGTH:
            raise ApplicationError(
                f"Idempotency-Key is longer than {MAX_KEY_LENGTH} characters.", {"field": "Idempotency-Key"}
            )
        fingerprint = _fingerprint(self, request)
        with transaction.atomic():
            idempotency_lock(request.user.pk, key)
            record = IdempotencyRecord.objects.filter(user=request.user, key=key).first()
            if record is not None:
                if record.fingerprint != fingerprint:
                    raise ApplicationError(
                        "This Idempotency-Key was already used for a different request.",
                        {"field": "Idempotency-Key"},
                        status=422,
                        code="idempotency_key_reused",
                    )
                response = Response(record.body, status=record.status, headers=record.headers)
                response["Idempotent-Replayed"] = "true"
                return response
            response = method(self, request, *args, **kwargs)
            if isinstance(response, Response) and 200 <= response.status_code < 300:
                IdempotencyRecord.objects.create(
                    user=request.user,
                    key=key,
                    fingerprint=fingerprint,
                    status=response.status_code,
                    body=json.loads(JSONRenderer().render(response.data) or b"null"),
                    headers={h: response[h] for h in REPLAYED_HEADERS if response.has_header(h)},
                )
            return response

    return wrapper
