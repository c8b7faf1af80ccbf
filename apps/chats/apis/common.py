"""What the chat API views share: the JSONL pass-through parser, id lists, and for the write path its
parsers, header parameters and the chat state answer."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.parsers import BaseParser

from apps.common.exceptions import ApplicationError
from apps.common.ids import id_from
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH
from apps.common.jsonpatch import MAX_OPERATIONS
from apps.common.parsers import JSONPatchParser, LimitedJSONParser, MergePatchParser

JSONL_CONTENT_TYPES = ("application/jsonl", "application/x-ndjson", "application/json-lines", "text/plain")


class JsonlPassthroughParser(BaseParser):
    """Accepts any other body without reading it: the import view streams `application/jsonl` itself, and this keeps
    DRF (its CSRF check for session clients reads request.POST) from answering 415 first."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {}


def parse_ids(values: list[str], field: str) -> list[int]:
    """character_ids as a comma-separated string, or repeated form fields."""
    parts = [part.strip() for value in values for part in str(value).split(",") if part.strip()]
    ids = [id_from(part) for part in parts]
    if None in ids:
        raise ApplicationError("Expected integer ids, comma-separated.", {"field": field})
    return ids


PATCH_PARSERS = [MergePatchParser, JSONPatchParser, LimitedJSONParser]
# The body of a PATCH on a JSON document (chat metadata, settings), for the schema.
PATCH_REQUEST_BODIES = {
    "application/merge-patch+json": OpenApiTypes.OBJECT,
    "application/json-patch+json": {"type": "array", "items": {"type": "object"}, "maxItems": MAX_OPERATIONS},
}
MIRROR = OpenApiParameter(
    "mirror",
    bool,
    description="True when the write makes the chat equal to a SillyTavern chat file (the SillyTavern extension "
    "mirroring the chat it has open): exports then keep that file's chat_metadata.integrity. Any other write gives "
    "exports a fresh one, so SillyTavern will not silently overwrite the newer chat.",
)
WRITE_PARAMETERS = [IF_MATCH, IDEMPOTENCY_KEY, MIRROR]


def mirrors_file(request) -> bool:
    return request.query_params.get("mirror", "").lower() in ("1", "true", "yes")


def patch_kind(request) -> str:
    """merge-patch+json or json-patch+json; plain JSON is a merge patch when it is an object, else a JSON Patch."""
    media = request.content_type.split(";")[0].strip().lower()
    if media == "application/merge-patch+json":
        return "merge"
    if media == "application/json-patch+json":
        return "json"
    return "merge" if isinstance(request.data, dict) else "json"


WRITES_HELP = (
    "How many writes the chat has had; it only grows. A client that saw a higher number is looking at a copy that "
    "went back in time (a database restored from an older backup): its missing messages were not deleted."
)


class ChatStateSerializer(serializers.Serializer):
    integrity = serializers.UUIDField()
    total_messages = serializers.IntegerField()
    writes = serializers.IntegerField(help_text=WRITES_HELP)


def chat_state(result_chat) -> dict:
    return {
        "integrity": result_chat.integrity,
        "total_messages": result_chat.message_count,
        "writes": result_chat.writes,
    }


def valid(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
