"""Chats: CRUD, SillyTavern JSONL import and export."""

from __future__ import annotations

import re

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis.common import JSONL_CONTENT_TYPES, WRITES_HELP, JsonlPassthroughParser, parse_ids
from apps.chats.models import Chat, ReplyOrder
from apps.chats.services.chats import chat_create, chat_delete, chat_export_lines, chat_update
from apps.chats.services.writes import chat_import_or_update
from apps.chats.signals import chat_progress
from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH, IF_MATCH_REQUIRED, request_integrity, with_etag
from apps.common.pagination import ListPagination
from apps.common.serializers import DictField, JSONField, StorableInputSerializer, paginated, patch_checked


class CharacterRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ChatSummarySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    characters = CharacterRefSerializer(many=True, source="characters.all")
    user_name = serializers.CharField()
    character_name = serializers.CharField()
    total_messages = serializers.IntegerField(source="message_count")
    integrity = serializers.UUIDField()
    writes = serializers.IntegerField(help_text=WRITES_HELP)
    client_key = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ChatDetailSerializer(ChatSummarySerializer):
    persona = serializers.IntegerField(
        source="persona_id", allow_null=True, help_text="Your persona in the chat (its name is `{{user}}`), or null."
    )
    reply_order = serializers.ChoiceField(
        choices=ReplyOrder.choices, help_text="Who replies in a group: natural order, or you choose."
    )
    create_date = JSONField()
    chat_metadata = serializers.DictField()
    has_header = serializers.BooleanField()
    indexed_messages = serializers.SerializerMethodField(help_text="Messages indexed for recall as they are now.")
    pending = serializers.SerializerMethodField(help_text="Messages still waiting to be (re-)indexed for recall.")

    def _progress(self, chat) -> dict[str, int]:
        if not hasattr(chat, "_progress"):
            chat._progress = {}
            for _, counts in chat_progress.send(sender=Chat, chat=chat):
                chat._progress.update(counts or {})
        return chat._progress

    def get_indexed_messages(self, chat) -> int:
        return self._progress(chat).get("indexed_messages", 0)

    def get_pending(self, chat) -> int:
        return self._progress(chat).get("pending", 0)


class ChatInputSerializer(StorableInputSerializer):
    title = serializers.CharField(max_length=300)
    character_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=50)
    user_name = serializers.CharField(allow_blank=True, required=False, max_length=200)
    character_name = serializers.CharField(allow_blank=True, required=False, max_length=200)
    chat_metadata = DictField(required=False, help_text="Replaces the stored chat_metadata object.")
    client_key = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=500,
        help_text="Your client's own name for the chat, unique among your chats (409 `client_key_taken`).",
    )
    persona = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="One of your personas, or null for none."
    )
    reply_order = serializers.ChoiceField(choices=ReplyOrder.choices, required=False)


class ChatListApi(APIView):
    @extend_schema(
        operation_id="chats_list",
        parameters=[
            OpenApiParameter("search", str, description="Filter by title or character name."),
            OpenApiParameter("client_key", str, description="Only the chat with this client key (none or one)."),
        ],
        responses=paginated(ChatSummarySerializer),
    )
    def get(self, request):
        paginator = ListPagination()
        qs = selectors.chat_list(
            user=request.user,
            search=request.query_params.get("search", ""),
            client_key=request.query_params.get("client_key"),
        )
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(ChatSummarySerializer(page, many=True).data)

    @extend_schema(operation_id="chats_create", request=ChatInputSerializer, responses={201: ChatDetailSerializer})
    @idempotent
    def post(self, request):
        serializer = ChatInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        chat = chat_create(user=request.user, persona_id=data.pop("persona", None), **data)
        return Response(ChatDetailSerializer(chat).data, status=status.HTTP_201_CREATED)


class ChatDetailApi(APIView):
    @extend_schema(operation_id="chats_retrieve", responses=ChatDetailSerializer)
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        return with_etag(Response(ChatDetailSerializer(chat).data), chat.integrity)

    @extend_schema(
        operation_id="chats_update",
        request=ChatInputSerializer,
        responses=ChatDetailSerializer,
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY],
    )
    @idempotent
    def patch(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = patch_checked(ChatInputSerializer, request.data, answered=ChatDetailSerializer(chat).data)
        chat = chat_update(
            chat=chat, data=serializer.validated_data, integrity=request_integrity(request, required=True)
        )
        return with_etag(Response(ChatDetailSerializer(chat).data), chat.integrity)

    @extend_schema(operation_id="chats_destroy", responses={204: None})
    @idempotent
    def delete(self, request, chat_id: int):
        chat_delete(chat=selectors.chat_get(user=request.user, chat_id=chat_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChatImportParamsSerializer(serializers.Serializer):
    title = serializers.CharField(
        required=False, allow_blank=True, max_length=300, help_text="Defaults to the file name."
    )
    character_ids = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Comma-separated character ids; by default the characters named "
        "in the file are linked, created when missing.",
    )
    client_key = serializers.CharField(
        required=False,
        max_length=500,
        help_text="Your client's name for the chat. When one of your chats has it, the file updates that chat "
        "(200) instead of making a second one; otherwise the new chat gets it (201).",
    )
    chat = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="Update this chat of yours with the file instead of making a new one (200). What the file "
        "replaces is kept as a revision; send If-Match to refuse when the chat changed since you read it.",
    )


class ChatImportInputSerializer(ChatImportParamsSerializer):
    file = serializers.FileField(help_text="A SillyTavern .jsonl chat file.")


class ChatImportOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    total_messages = serializers.IntegerField(source="message_count")
    integrity = serializers.UUIDField()
    writes = serializers.IntegerField(help_text=WRITES_HELP)
    client_key = serializers.CharField(allow_null=True)
    created = serializers.SerializerMethodField(help_text="False when the file updated an existing chat.")

    def get_created(self, chat) -> bool:
        return self.context["created"]


class ChatImportApi(APIView):
    """Import a SillyTavern JSONL chat: multipart field `file`, or the raw body as `application/jsonl`. `title`,
    `character_ids`, `client_key` and `chat` come as query parameters, or with multipart as form fields. All or
    nothing; a bad line answers 400 naming it. With `chat`, or a `client_key` one of your chats holds, the file
    updates that chat."""

    parser_classes = [MultiPartParser, JsonlPassthroughParser]
    streamed_body = True

    @extend_schema(
        operation_id="chats_import",
        request={"multipart/form-data": ChatImportInputSerializer, "application/jsonl": OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter("title", str, description="The chat's title (multipart: or a form field)."),
            OpenApiParameter("character_ids", str, description="Raw-body imports: comma-separated character ids."),
            OpenApiParameter("client_key", str, description="Raw-body imports: the chat's client key."),
            OpenApiParameter("chat", int, description="Raw-body imports: the chat to update."),
            IF_MATCH,
            IDEMPOTENCY_KEY,
        ],
        responses={201: ChatImportOutputSerializer, 200: ChatImportOutputSerializer},
    )
    @idempotent
    def post(self, request):
        content_type = request.content_type.split(";")[0].strip().lower()
        if content_type == "multipart/form-data":
            upload = request.FILES.get("file")
            if upload is None:
                raise ApplicationError("Send the chat file in the multipart field `file`.", {"field": "file"})
            params, stream, filename = request.query_params.copy(), upload, upload.name
            for key in ("title", "character_ids", "client_key", "chat"):  # a form field wins over the query's
                if key in request.data:
                    params.setlist(key, request.data.getlist(key))
        elif content_type in JSONL_CONTENT_TYPES:
            # Spooled already when an Idempotency-Key asked for the body's hash; streamed straight otherwise.
            spooled = getattr(request._request, "_lorekeeper_spool", None)
            params, stream, filename = request.query_params, spooled[0] if spooled else request._request, ""
        else:
            raise ApplicationError(
                "Send multipart/form-data with a `file` field, or the raw file as application/jsonl.",
                {"field": "Content-Type", "received": content_type},
                status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            )
        fields = ("title", "character_ids", "client_key", "chat")
        checked = ChatImportParamsSerializer(data={k: params.get(k) for k in fields if k in params})
        checked.is_valid(raise_exception=True)
        options = checked.validated_data
        title = options.get("title", "")
        ids = parse_ids(params.getlist("character_ids"), "character_ids")
        chat, created = chat_import_or_update(
            user=request.user,
            stream=stream,
            filename=filename,
            title=title,
            character_ids=ids,
            client_key=options.get("client_key"),
            chat_id=options.get("chat"),
            integrity=request_integrity(request),
        )
        body = ChatImportOutputSerializer(chat, context={"created": created}).data
        answer = Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
        return with_etag(answer, chat.integrity)


def export_filename(title: str) -> str:
    safe = re.sub(r"[^\w\- .@]+", "_", title).strip() or "chat"
    return f"{safe[:120]}.jsonl"


def export_response(chat) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        chat_export_lines(chat=chat, for_sillytavern=True), content_type="application/jsonl; charset=utf-8"
    )
    response["Content-Disposition"] = content_disposition_header(True, export_filename(chat.title))
    return response


class ChatExportApi(APIView):
    @extend_schema(operation_id="chats_export", responses={(200, "application/jsonl"): OpenApiTypes.BINARY})
    def get(self, request, chat_id: int):
        return export_response(selectors.chat_get(user=request.user, chat_id=chat_id))
