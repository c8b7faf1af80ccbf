"""Optimistic locking over HTTP: the integrity a client last saw comes as If-Match (or an `integrity` body field);
every answer to a read or write carries the current one as ETag."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiParameter

from apps.common.exceptions import ApplicationError

IF_MATCH = OpenApiParameter(
    "If-Match",
    str,
    OpenApiParameter.HEADER,
    description='The integrity you last read, as "<uuid>" (or an `integrity` field).',
)
IF_MATCH_REQUIRED = OpenApiParameter(
    "If-Match", str, OpenApiParameter.HEADER, required=True, description='The integrity you last read, as "<uuid>".'
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, description="Retries with the same key answer the first answer."
)


def request_integrity(request, body: Any = None, *, required: bool = False) -> uuid.UUID | None:
    raw, source = request.headers.get("If-Match", "").strip(), "If-Match"
    if raw:
        raw = raw.removeprefix("W/").strip('"')
    elif isinstance(body, dict) and body.get("integrity") not in (None, ""):
        raw, source = body["integrity"], "integrity"
    if not raw:
        if required:
            raise ApplicationError(
                "Send the integrity you last read, as an If-Match header or an `integrity` field.",
                {"field": "integrity"},
                status=428,
                code="integrity_required",
            )
        return None
    try:
        return uuid.UUID(str(raw))
    except ValueError as exc:
        raise ApplicationError(f"{source} is not an integrity UUID.", {"field": source}) from exc


def with_etag(response, integrity: uuid.UUID):
    response["ETag"] = f'"{integrity}"'
    return response
