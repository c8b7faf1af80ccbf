"""Append, JSON Patch, metadata patches and delta reads (Luker's endpoints, docs/GLOSSARY.md; for many
clients)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis.common import (
    MIRROR,
    PATCH_PARSERS,
    PATCH_REQUEST_BODIES,
    WRITE_PARAMETERS,
    ChatStateSerializer,
    chat_state,
    mirrors_file,
    patch_kind,
    valid,
)
from apps.chats.services import writes
from apps.chats.services.patch import MAX_PATCH_OPERATIONS, chat_patch
from apps.common.idempotency import idempotent
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH_REQUIRED, request_integrity, with_etag
from apps.common.serializers import JSONField


class AppendInputSerializer(serializers.Serializer):
    messages = serializers.ListField(child=JSONField(), max_length=writes.MAX_APPEND_MESSAGES)
    generation_id = serializers.CharField(required=False, allow_null=True, max_length=200)
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")


class AppendOutputSerializer(ChatStateSerializer):
    appended = serializers.IntegerField()
    skipped = serializers.IntegerField()


class PatchInputSerializer(serializers.Serializer):
    operations = serializers.ListField(
        child=JSONField(),
        max_length=MAX_PATCH_OPERATIONS,
        help_text="RFC 6902 operations against the message array. A patch writes at most the JSON body limit "
        "(values added, replaced and copied): 413 `patch_too_large` naming the operation beyond it.",
    )
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")


class PatchOutputSerializer(ChatStateSerializer):
    applied = serializers.IntegerField()
    skipped = serializers.IntegerField()


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
        data = valid(AppendInputSerializer, request.data)
        result = writes.chat_append(
            chat=chat,
            messages=data["messages"],
            generation_id=data.get("generation_id"),
            integrity=request_integrity(request, request.data, required=True),
            mirror=mirrors_file(request),
        )
        body = {"appended": result.applied, "skipped": result.skipped, **chat_state(result.chat)}
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
        data = valid(PatchInputSerializer, request.data)
        result = chat_patch(
            chat=chat,
            operations=data["operations"],
            integrity=request_integrity(request, request.data, required=True),
            mirror=mirrors_file(request),
        )
        body = {"applied": result.applied, "skipped": result.skipped, **chat_state(result.chat)}
        return with_etag(Response(PatchOutputSerializer(body).data), result.chat.integrity)


class MetadataOutputSerializer(ChatStateSerializer):
    chat_metadata = serializers.DictField()


class ChatMetadataApi(APIView):
    parser_classes = PATCH_PARSERS

    @extend_schema(operation_id="chats_metadata_retrieve", responses=MetadataOutputSerializer)
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        body = {"chat_metadata": chat.chat_metadata, **chat_state(chat)}
        return with_etag(Response(MetadataOutputSerializer(body).data), chat.integrity)

    @extend_schema(
        operation_id="chats_metadata_patch",
        request=PATCH_REQUEST_BODIES,
        responses=MetadataOutputSerializer,
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY, MIRROR],
    )
    @idempotent
    def patch(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        # The body is the patch itself, so the integrity can only come as If-Match here.
        integrity = request_integrity(request, required=True)
        chat = writes.chat_metadata_patch(
            chat=chat, patch=request.data, kind=patch_kind(request), integrity=integrity, mirror=mirrors_file(request)
        )
        body = {"chat_metadata": chat.chat_metadata, **chat_state(chat)}
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
        query = valid(DeltaQuerySerializer, request.query_params)
        delta = writes.chat_delta(chat=chat, from_index=query["from_index"], limit=query["limit"])
        next_index = delta.from_index + len(delta.messages)
        has_more = next_index < delta.chat.message_count
        body = {
            "messages": delta.messages,
            "chat_metadata": delta.chat.chat_metadata,
            "from_index": delta.from_index,
            "next_index": next_index if has_more else None,
            "has_more": has_more,
            **chat_state(delta.chat),
        }
        return with_etag(Response(DeltaOutputSerializer(body).data), delta.chat.integrity)
