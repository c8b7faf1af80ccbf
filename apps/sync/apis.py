"""The incremental sync API (Luker's endpoints, done server-side for many clients), settings and extension data."""

from __future__ import annotations

import json
import tempfile

import ijson
from django.conf import settings
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis import JsonlPassthroughParser
from apps.chats.jsonl import ImportLineError
from apps.common.exceptions import ApplicationError
from apps.common.integrity import request_integrity, with_etag
from apps.common.parsers import JSONPatchParser, LimitedJSONParser, MergePatchParser
from apps.common.serializers import DictField
from apps.common.streams import spool_body
from apps.sync.idempotency import idempotent
from apps.sync.models import ChatRevision
from apps.sync.services import chats as sync
from apps.sync.services.extension_data import extension_data_get, extension_data_set
from apps.sync.services.settings import settings_get, settings_patch

PATCH_PARSERS = [MergePatchParser, JSONPatchParser, LimitedJSONParser]
INTEGRITY_PARAMETER = OpenApiParameter(
    "If-Match", str, OpenApiParameter.HEADER, description="The integrity you last read (or an `integrity` field)."
)
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, description="Retries with the same key answer the first answer."
)
WRITE_PARAMETERS = [INTEGRITY_PARAMETER, IDEMPOTENCY_PARAMETER]


def _patch_kind(request) -> str:
    """merge-patch+json or json-patch+json; plain JSON is a merge patch when it is an object, else a JSON Patch."""
    media = request.content_type.split(";")[0].strip().lower()
    if media == "application/merge-patch+json":
        return "merge"
    if media == "application/json-patch+json":
        return "json"
    return "merge" if isinstance(request.data, dict) else "json"


class ChatStateSerializer(serializers.Serializer):
    integrity = serializers.UUIDField()
    total_messages = serializers.IntegerField()


class AppendInputSerializer(serializers.Serializer):
    messages = serializers.ListField(child=serializers.JSONField(), max_length=sync.MAX_APPEND_MESSAGES)
    generation_id = serializers.CharField(required=False, allow_null=True, max_length=200)
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")


class AppendOutputSerializer(ChatStateSerializer):
    appended = serializers.IntegerField()
    skipped = serializers.IntegerField()


class PatchInputSerializer(serializers.Serializer):
    operations = serializers.ListField(
        child=serializers.JSONField(), help_text="RFC 6902 operations against the message array."
    )
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")


class PatchOutputSerializer(ChatStateSerializer):
    applied = serializers.IntegerField()
    skipped = serializers.IntegerField()


def _state(result_chat) -> dict:
    return {"integrity": result_chat.integrity, "total_messages": result_chat.message_count}


class ChatAppendApi(APIView):
    @extend_schema(
        operation_id="chats_append",
        request=AppendInputSerializer,
        responses=AppendOutputSerializer,
        parameters=WRITE_PARAMETERS,
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        data = _valid(AppendInputSerializer, request.data)
        result = sync.chat_append(
            chat=chat,
            messages=data["messages"],
            generation_id=data.get("generation_id"),
            integrity=request_integrity(request, request.data, required=True),
        )
        body = {"appended": result.applied, "skipped": result.skipped, **_state(result.chat)}
        return with_etag(Response(AppendOutputSerializer(body).data), result.chat.integrity)


class ChatPatchApi(APIView):
    @extend_schema(
        operation_id="chats_patch",
        request=PatchInputSerializer,
        responses=PatchOutputSerializer,
        parameters=WRITE_PARAMETERS,
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        data = _valid(PatchInputSerializer, request.data)
        result = sync.chat_patch(
            chat=chat,
            operations=data["operations"],
            integrity=request_integrity(request, request.data, required=True),
        )
        body = {"applied": result.applied, "skipped": result.skipped, **_state(result.chat)}
        return with_etag(Response(PatchOutputSerializer(body).data), result.chat.integrity)


class MetadataOutputSerializer(ChatStateSerializer):
    chat_metadata = serializers.DictField()


class ChatMetadataApi(APIView):
    parser_classes = PATCH_PARSERS

    @extend_schema(operation_id="chats_metadata_retrieve", responses=MetadataOutputSerializer)
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        body = {"chat_metadata": chat.chat_metadata, **_state(chat)}
        return with_etag(Response(MetadataOutputSerializer(body).data), chat.integrity)

    @extend_schema(
        operation_id="chats_metadata_patch",
        request={
            "application/merge-patch+json": OpenApiTypes.OBJECT,
            "application/json-patch+json": {"type": "array", "items": {"type": "object"}},
        },
        responses=MetadataOutputSerializer,
        parameters=[
            OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, required=True),
            IDEMPOTENCY_PARAMETER,
        ],
    )
    @idempotent
    def patch(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        # The body is the patch itself, so the integrity can only come as If-Match here.
        integrity = request_integrity(request, required=True)
        chat = sync.chat_metadata_patch(chat=chat, patch=request.data, kind=_patch_kind(request), integrity=integrity)
        body = {"chat_metadata": chat.chat_metadata, **_state(chat)}
        return with_etag(Response(MetadataOutputSerializer(body).data), chat.integrity)


class DeltaQuerySerializer(serializers.Serializer):
    from_index = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=selectors.MAX_PAGE, default=100)


class DeltaOutputSerializer(ChatStateSerializer):
    messages = serializers.ListField(child=serializers.DictField(), help_text="SillyTavern message objects.")
    chat_metadata = serializers.DictField()
    from_index = serializers.IntegerField()
    next_index = serializers.IntegerField(allow_null=True)
    has_more = serializers.BooleanField()


class ChatDeltaApi(APIView):
    @extend_schema(operation_id="chats_delta", parameters=[DeltaQuerySerializer], responses=DeltaOutputSerializer)
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        query = _valid(DeltaQuerySerializer, request.query_params)
        delta = sync.chat_delta(chat=chat, from_index=query["from_index"], limit=query["limit"])
        next_index = delta.from_index + len(delta.messages)
        has_more = next_index < delta.chat.message_count
        body = {
            "messages": delta.messages,
            "chat_metadata": delta.chat.chat_metadata,
            "from_index": delta.from_index,
            "next_index": next_index if has_more else None,
            "has_more": has_more,
            **_state(delta.chat),
        }
        return with_etag(Response(DeltaOutputSerializer(body).data), delta.chat.integrity)


def _save_to_jsonl(body) -> tuple[tempfile.SpooledTemporaryFile, object, bool]:
    """Turn `{"chat": [...], "integrity", "force"}` into a JSONL spool (disk past 8 MB) item by item, so a 100 MB
    save never sits in memory whole. ijson's C parser stops at integers beyond 64 bits, which SillyTavern files
    may hold (ids, seeds): those bodies are parsed again with its pure-Python parser."""
    try:
        return _parse_save(body, ijson)
    except ijson.JSONError as exc:
        if "overflow" not in str(exc).lower():
            raise ApplicationError(f"The body is not valid JSON: {exc}.", {"field": "body"}) from exc
    body.seek(0)
    try:
        return _parse_save(body, ijson.get_backend("python"))
    except ijson.JSONError as exc:
        raise ApplicationError(f"The body is not valid JSON: {exc}.", {"field": "body"}) from exc


def _parse_save(body, backend) -> tuple[tempfile.SpooledTemporaryFile, object, bool]:
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)
    integrity, force, seen_chat, builder, item = None, False, False, None, 0
    for prefix, event, value in backend.parse(body, use_float=True):
        if builder is not None:
            builder.event(event, value)
            if prefix == "chat.item" and event == "end_map":
                spool.write(json.dumps(builder.value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
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

    chat = serializers.ListField(child=serializers.DictField(), help_text="The header line, then every message.")
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
            chat = sync.chat_save(chat=chat, jsonl=spool, integrity=integrity, force=force)
        except ImportLineError as exc:
            where = f"chat[{exc.extra['line'] - 1}]"
            raise ApplicationError(f"{where}: {exc.extra['problem']}", {"field": where}) from exc
        return with_etag(Response(ChatStateSerializer(_state(chat)).data), chat.integrity)


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
        revisions = ChatRevision.objects.filter(chat=chat).defer("jsonl_gzip")[:100]
        return Response(RevisionSerializer(revisions, many=True).data)


class ChatRevisionExportApi(APIView):
    @extend_schema(operation_id="chats_revisions_export", responses={(200, "application/jsonl"): OpenApiTypes.BINARY})
    def get(self, request, chat_id: int, revision_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        revision = ChatRevision.objects.get(chat=chat, pk=revision_id)
        response = StreamingHttpResponse(sync.revision_lines(revision=revision), content_type="application/jsonl")
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
        chat = sync.chat_revision_restore(chat=chat, revision_id=revision_id, integrity=integrity)
        return with_etag(Response(ChatStateSerializer(_state(chat)).data), chat.integrity)


class ExtensionDataOutputSerializer(ChatStateSerializer):
    index = serializers.IntegerField()
    namespace = serializers.CharField()
    data = serializers.JSONField(help_text="message.extra[namespace]")
    swipe_id = serializers.IntegerField(allow_null=True)
    swipe_data = serializers.JSONField(help_text="swipe_info[swipe_id].extra[namespace], the current swipe's copy")


class ExtensionDataInputSerializer(serializers.Serializer):
    values = DictField(help_text="Keys to set in the namespace (others are kept); null sets null.")
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")


def _extension_answer(found, chat) -> Response:
    body = {
        "index": found.message.index,
        "namespace": found.namespace,
        "data": found.data,
        "swipe_id": found.message.swipe_id,
        "swipe_data": found.swipe_data,
        **_state(chat),
    }
    return with_etag(Response(ExtensionDataOutputSerializer(body).data), chat.integrity)


class MessageExtensionDataApi(APIView):
    @extend_schema(operation_id="messages_data_retrieve", responses=ExtensionDataOutputSerializer)
    def get(self, request, chat_id: int, index: int, namespace: str):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        return _extension_answer(extension_data_get(chat=chat, index=index, namespace=namespace), chat)

    @extend_schema(
        operation_id="messages_data_update",
        request=ExtensionDataInputSerializer,
        responses=ExtensionDataOutputSerializer,
        parameters=WRITE_PARAMETERS,
    )
    @idempotent
    def patch(self, request, chat_id: int, index: int, namespace: str):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        data = _valid(ExtensionDataInputSerializer, request.data)
        found, chat = extension_data_set(
            chat=chat,
            index=index,
            namespace=namespace,
            values=data["values"],
            integrity=request_integrity(request, request.data, required=True),
        )
        return _extension_answer(found, chat)


class SettingsOutputSerializer(serializers.Serializer):
    settings = serializers.DictField(help_text="One object per extension namespace.")
    integrity = serializers.UUIDField()


class SettingsApi(APIView):
    parser_classes = PATCH_PARSERS

    @extend_schema(operation_id="settings_retrieve", responses=SettingsOutputSerializer)
    def get(self, request):
        document = settings_get(user=request.user)
        body = {"settings": document.data, "integrity": document.integrity}
        return with_etag(Response(SettingsOutputSerializer(body).data), document.integrity)

    @extend_schema(
        operation_id="settings_patch",
        request={
            "application/merge-patch+json": OpenApiTypes.OBJECT,
            "application/json-patch+json": {"type": "array", "items": {"type": "object"}},
        },
        responses=SettingsOutputSerializer,
        parameters=[OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, required=True), IDEMPOTENCY_PARAMETER],
    )
    @idempotent
    def patch(self, request):
        document = settings_patch(
            user=request.user,
            patch=request.data,
            kind=_patch_kind(request),
            integrity=request_integrity(request, required=True),
        )
        body = {"settings": document.data, "integrity": document.integrity}
        return with_etag(Response(SettingsOutputSerializer(body).data), document.integrity)


def _valid(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
