"""JSON request bodies with a size limit (413 above it) and the patch media types of RFC 6902 and RFC 7386."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import json_problem, loads_strict


def read_limited(stream, limit: int) -> bytes:
    data = stream.read(limit + 1) if stream is not None else b""
    if len(data) > limit:
        raise ApplicationError(
            f"The request body is larger than {limit // (1024 * 1024)} MB.", {"max_bytes": limit}, status=413
        )
    return data


class LimitedJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        data = read_limited(stream, settings.LOREKEEPER_MAX_JSON_BYTES)
        try:
            return loads_strict(data.decode("utf-8")) if data else {}
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise ParseError(f"JSON parse error: {json_problem(exc)}") from exc


class MergePatchParser(LimitedJSONParser):
    media_type = "application/merge-patch+json"


class JSONPatchParser(LimitedJSONParser):
    media_type = "application/json-patch+json"
