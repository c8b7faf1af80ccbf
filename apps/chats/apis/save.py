"""SillyTavern's full save, for legacy clients, and the revisions a forced save keeps."""

from __future__ import annotations

import json
import re
import tempfile

import ijson
from django.conf import settings
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis.common import (
    WRITE_PARAMETERS,
    ChatStateSerializer,
    JsonlPassthroughParser,
    chat_state,
)
from apps.chats.jsonl import ImportLineError
from apps.chats.selectors import REVISION_LIST_LIMIT, revision_get, revision_lines, revision_list
from apps.chats.services import writes
from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.integrity import request_integrity, with_etag
from apps.common.streams import spool_body

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_surrogate_escape(body) -> bool:
    """ijson's C parser turns a lone surrogate escape into "?"; bodies with any surrogate escape (a valid pair
    too) go to the pure-Python parser, which keeps them, so an unpaired one is refused as it is on import."""
    tail = b""
    while chunk := body.read(256 * 1024):
        if _SURROGATE_ESCAPE.search(tail + chunk):
            body.seek(0)
            return True
        tail = chunk[-6:]
    body.seek(0)
    return False


def _save_to_jsonl(body) -> tuple[tempfile.SpooledTemporaryFile, object, bool]:
    """Turn `{"chat": [...], "integrity", "force"}` into a JSONL spool (disk past 8 MB) item by item, so a 100 MB
    save never sits in memory whole. ijson's C parser stops at integers beyond 64 bits, which SillyTavern files
    may hold (ids, seeds): those bodies are parsed again with its pure-Python parser."""
    backends = [ijson.get_backend("python")] if _has_surrogate_escape(body) else [ijson, ijson.get_backend("python")]
    for i, backend in enumerate(backends):
        try:
            return _parse_save(body, backend)
        except (ijson.JSONError, ValueError) as exc:  # the pure-Python parser raises ValueError for a bad escape
            if i == len(backends) - 1 or "overflow" not in str(exc).lower():
                raise ApplicationError(f"The body is not valid JSON: {exc}.", {"field": "body"}) from exc
        body.seek(0)
    raise AssertionError("unreachable")


def _json_line(value) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the loader can refuse it naming the item
        return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def _parse_save(body, backend) -> tuple[tempfile.SpooledTemporaryFile, object, bool]:
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)
    integrity, force, seen_chat, builder, item = None, False, False, None, 0
    for prefix, event, value in backend.parse(body, use_float=True):
        if builder is not None:
            builder.event(event, value)
            if prefix == "chat.item" and event == "end_map":
                spool.write(_json_line(builder.value))
                builder, item = None, item + 1
        elif prefix == "chat.item":
            if event != "start_map":
                raise ApplicationError(f"chat[{item}] is not a JSON object.", {"field": f"chat[{item}]"})
            builder = ijson.ObjectBuilder()
            builder.event(event, value)
        elif prefix == "chat" and event == "start_array":
            seen_chat = True
        elif prefix == "integrity" and event in ("string", "null"):
            integrity = value
        elif prefix == "force" and event == "boolean":
            force = value
    if not seen_chat:
        raise ApplicationError("`chat` must be a JSON array: the header, then the messages.", {"field": "chat"})
    spool.seek(0)
    return spool, integrity, force


class SaveInputSerializer(serializers.Serializer):
    """For the schema: the body is read as a stream, not through this serializer."""

    chat = serializers.ListField(
        child=serializers.DictField(),
        # The body limit bounds it: each line takes at least three bytes ("{}" and a comma).
        max_length=settings.LOREKEEPER_MAX_IMPORT_BYTES // 3,
        help_text="The header line, then every message (as many as the import size limit holds).",
    )
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")
    force = serializers.BooleanField(
        required=False, default=False, help_text="Overwrite even if the chat changed; the replaced one is kept."
    )


class ChatSaveApi(APIView):
    """SillyTavern's full overwrite, for legacy clients (and the benchmark baseline). Prefer append and patch."""

    parser_classes = [JsonlPassthroughParser]
    streamed_body = True

    @extend_schema(
        operation_id="chats_save",
        request=SaveInputSerializer,
        responses=ChatStateSerializer,
        parameters=WRITE_PARAMETERS,
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        if request.content_type.split(";")[0].strip().lower() != "application/json":
            raise ApplicationError(
                "Send the save as application/json.", {"field": "Content-Type"}, status=415, code="unsupported_media"
            )
        body, _ = spool_body(request, limit=settings.LOREKEEPER_MAX_IMPORT_BYTES)
        spool, body_integrity, force = _save_to_jsonl(body)
        integrity = request_integrity(request, {"integrity": body_integrity}, required=not force)
        try:
            chat = writes.chat_save(chat=chat, jsonl=spool, integrity=integrity, force=force)
        except ImportLineError as exc:
            where = f"chat[{exc.extra['line'] - 1}]"
            raise ApplicationError(f"{where}: {exc.extra['problem']}", {"field": where}) from exc
        return with_etag(Response(ChatStateSerializer(chat_state(chat)).data), chat.integrity)


class RevisionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reason = serializers.CharField()
    integrity = serializers.UUIDField()
    message_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class ChatRevisionListApi(APIView):
    @extend_schema(operation_id="chats_revisions_list", responses=RevisionSerializer(many=True))
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        revisions = revision_list(chat=chat)[:REVISION_LIST_LIMIT]
        return Response(RevisionSerializer(revisions, many=True).data)


class ChatRevisionExportApi(APIView):
    @extend_schema(operation_id="chats_revisions_export", responses={(200, "application/jsonl"): OpenApiTypes.BINARY})
    def get(self, request, chat_id: int, revision_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        revision = revision_get(chat=chat, revision_id=revision_id)
        response = StreamingHttpResponse(revision_lines(revision=revision), content_type="application/jsonl")
        response["Content-Disposition"] = content_disposition_header(
            True, f"{chat.title} (revision {revision.pk}).jsonl"
        )
        return response


class ChatRevisionRestoreApi(APIView):
    @extend_schema(
        operation_id="chats_revisions_restore",
        request=None,
        responses=ChatStateSerializer,
        parameters=WRITE_PARAMETERS,
    )
    @idempotent
    def post(self, request, chat_id: int, revision_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        integrity = request_integrity(request, request.data, required=True)
        chat = writes.chat_revision_restore(chat=chat, revision_id=revision_id, integrity=integrity)
        return with_etag(Response(ChatStateSerializer(chat_state(chat)).data), chat.integrity)
