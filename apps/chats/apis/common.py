"""What the chat API views share: pagination, the JSONL pass-through parser, id lists."""

from __future__ import annotations

import re

from rest_framework.pagination import CursorPagination
from rest_framework.parsers import BaseParser

from apps.common.exceptions import ApplicationError

JSONL_CONTENT_TYPES = ("application/jsonl", "application/x-ndjson", "application/json-lines", "text/plain")


class ListPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-id"


class JsonlPassthroughParser(BaseParser):
    """Accepts any other body without reading it: the import view streams `application/jsonl` itself, and this keeps
    DRF (its CSRF check for session clients reads request.POST) from answering 415 first."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


_ID = re.compile(r"[0-9]{1,18}")


def parse_ids(values: list[str], field: str) -> list[int]:
    """character_ids as a comma-separated string, or repeated form fields."""
    parts = [part.strip() for value in values for part in str(value).split(",") if part.strip()]
    if not all(_ID.fullmatch(part) for part in parts):
        raise ApplicationError("Expected integer ids, comma-separated.", {"field": field})
    return [int(part) for part in parts]
