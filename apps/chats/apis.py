"""REST API for characters, chats and messages (one APIView per resource and operation set)."""

from __future__ import annotations

import re

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.models import Message
from apps.chats.services.cards import character_import_card
from apps.chats.services.characters import character_create, character_delete, character_update
from apps.chats.services.chats import chat_create, chat_delete, chat_export_lines, chat_import, chat_update
from apps.chats.services.messages import message_append, message_delete, message_update
from apps.common.exceptions import ApplicationError
from apps.common.integrity import request_integrity, with_etag
from apps.common.serializers import DictField, StorableInputSerializer
from apps.sync.idempotency import idempotent

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


def _parse_ids(values: list[str], field: str) -> list[int]:
    """character_ids as a comma-separated string, or repeated form fields."""
    parts = [part.strip() for value in values for part in str(value).split(",") if part.strip()]
    if not all(_ID.fullmatch(part) for part in parts):
        raise ApplicationError("Expected integer ids, comma-separated.", {"field": field})
    return [int(part) for part in parts]


# ----------------------------------------------------------------------------------------------------- characters


class CharacterOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    personality = serializers.CharField()
    scenario = serializers.CharField()
    first_mes = serializers.CharField()
    mes_example = serializers.CharField()
    system_prompt = serializers.CharField()
    creator_notes = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    card_data = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class CharacterInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    personality = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    scenario = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    first_mes = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    mes_example = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    system_prompt = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    creator_notes = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=100)
    card_data = DictField(required=False, help_text="Any other card data, kept verbatim.")


class CharacterListApi(APIView):
    @extend_schema(
        operation_id="characters_list",
        parameters=[OpenApiParameter("search", str, description="Filter by name (case-insensitive substring).")],
        responses=CharacterOutputSerializer(many=True),
    )
    def get(self, request):
        paginator = ListPagination()
        qs = selectors.character_list(user=request.user, search=request.query_params.get("search", ""))
        page = paginator.paginate_queryset(qs.order_by("-id"), request, view=self)
        return paginator.get_paginated_response(CharacterOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="characters_create", request=CharacterInputSerializer, responses={201: CharacterOutputSerializer}
    )
    @idempotent
    def post(self, request):
        serializer = CharacterInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        character = character_create(user=request.user, **serializer.validated_data)
        return Response(CharacterOutputSerializer(character).data, status=status.HTTP_201_CREATED)


class CharacterDetailApi(APIView):
    @extend_schema(operation_id="characters_retrieve", responses=CharacterOutputSerializer)
    def get(self, request, character_id: int):
        character = selectors.character_get(user=request.user, character_id=character_id)
        return Response(CharacterOutputSerializer(character).data)

    @extend_schema(
        operation_id="characters_update", request=CharacterInputSerializer, responses=CharacterOutputSerializer
    )
    @idempotent
    def patch(self, request, character_id: int):
        character = selectors.character_get(user=request.user, character_id=character_id)
        serializer = CharacterInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        character = character_update(character=character, data=serializer.validated_data)
        return Response(CharacterOutputSerializer(character).data)

    @extend_schema(operation_id="characters_destroy", responses={204: None})
    @idempotent
    def delete(self, request, character_id: int):
        character_delete(character=selectors.character_get(user=request.user, character_id=character_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class CharacterCardImportInputSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A character card: SillyTavern PNG, or V1/V2/V3 JSON.")


class CharacterImportApi(APIView):
    """Import a character card; the whole card is kept verbatim in `card_data`."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="characters_import",
        request={"multipart/form-data": CharacterCardImportInputSerializer},
        responses={201: CharacterOutputSerializer},
    )
    @idempotent
    def post(self, request):
        serializer = CharacterCardImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        character = character_import_card(user=request.user, stream=serializer.validated_data["file"])
        return Response(CharacterOutputSerializer(character).data, status=status.HTTP_201_CREATED)


# ---------------------------------------------------------------------------------------------------------- chats


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
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ChatDetailSerializer(ChatSummarySerializer):
    create_date = serializers.JSONField()
    chat_metadata = serializers.DictField()
    has_header = serializers.BooleanField()


class ChatInputSerializer(StorableInputSerializer):
    title = serializers.CharField(max_length=300)
    character_ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=50)
    user_name = serializers.CharField(allow_blank=True, required=False, max_length=200)
    character_name = serializers.CharField(allow_blank=True, required=False, max_length=200)
    chat_metadata = DictField(required=False, help_text="Replaces the stored chat_metadata object.")


class ChatListApi(APIView):
    @extend_schema(
        operation_id="chats_list",
        parameters=[OpenApiParameter("search", str, description="Filter by title or character name.")],
        responses=ChatSummarySerializer(many=True),
    )
    def get(self, request):
        paginator = ListPagination()
        qs = selectors.chat_list(user=request.user, search=request.query_params.get("search", ""))
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(ChatSummarySerializer(page, many=True).data)

    @extend_schema(operation_id="chats_create", request=ChatInputSerializer, responses={201: ChatDetailSerializer})
    @idempotent
    def post(self, request):
        serializer = ChatInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        chat = chat_create(user=request.user, **serializer.validated_data)
        return Response(ChatDetailSerializer(chat).data, status=status.HTTP_201_CREATED)


class ChatDetailApi(APIView):
    @extend_schema(operation_id="chats_retrieve", responses=ChatDetailSerializer)
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        return with_etag(Response(ChatDetailSerializer(chat).data), chat.integrity)

    @extend_schema(operation_id="chats_update", request=ChatInputSerializer, responses=ChatDetailSerializer)
    @idempotent
    def patch(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = ChatInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
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


class ChatImportInputSerializer(ChatImportParamsSerializer):
    file = serializers.FileField(help_text="A SillyTavern .jsonl chat file.")


class ChatImportOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    total_messages = serializers.IntegerField(source="message_count")
    integrity = serializers.UUIDField()


class ChatImportApi(APIView):
    """Import a SillyTavern JSONL chat: multipart field `file`, or the raw body as `application/jsonl` (then
    `title` and `character_ids` come as query parameters). All or nothing; a bad line answers 400 naming it."""

    parser_classes = [MultiPartParser, JsonlPassthroughParser]
    streamed_body = True

    @extend_schema(
        operation_id="chats_import",
        request={"multipart/form-data": ChatImportInputSerializer, "application/jsonl": OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter("title", str, description="Raw-body imports: the chat's title."),
            OpenApiParameter("character_ids", str, description="Raw-body imports: comma-separated character ids."),
        ],
        responses={201: ChatImportOutputSerializer},
    )
    @idempotent
    def post(self, request):
        content_type = request.content_type.split(";")[0].strip().lower()
        if content_type == "multipart/form-data":
            upload = request.FILES.get("file")
            if upload is None:
                raise ApplicationError("Send the chat file in the multipart field `file`.", {"field": "file"})
            params, stream, filename = request.data, upload, upload.name
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
        checked = ChatImportParamsSerializer(
            data={k: params.get(k) for k in ("title", "character_ids") if k in params}
        )
        checked.is_valid(raise_exception=True)
        title = checked.validated_data.get("title", "")
        ids = _parse_ids(params.getlist("character_ids"), "character_ids")
        chat = chat_import(user=request.user, stream=stream, filename=filename, title=title, character_ids=ids)
        return Response(ChatImportOutputSerializer(chat).data, status=status.HTTP_201_CREATED)


def export_filename(title: str) -> str:
    safe = re.sub(r"[^\w\- .@]+", "_", title).strip() or "chat"
    return f"{safe[:120]}.jsonl"


def export_response(chat) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chat_export_lines(chat=chat), content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, export_filename(chat.title))
    return response


class ChatExportApi(APIView):
    @extend_schema(operation_id="chats_export", responses={(200, "application/jsonl"): OpenApiTypes.BINARY})
    def get(self, request, chat_id: int):
        return export_response(selectors.chat_get(user=request.user, chat_id=chat_id))


# ------------------------------------------------------------------------------------------------------- messages


class MessageOutputSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    name = serializers.CharField()
    is_user = serializers.BooleanField()
    is_system = serializers.BooleanField()
    send_date = serializers.JSONField()
    mes = serializers.CharField()
    extra = serializers.DictField()
    swipes = serializers.JSONField()
    swipe_id = serializers.IntegerField(allow_null=True)
    swipe_info = serializers.JSONField()
    other_fields = serializers.DictField(help_text="Keys of the SillyTavern message beyond the ones above.")


class MessageInputSerializer(StorableInputSerializer):
    name = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    is_user = serializers.BooleanField(required=False)
    is_system = serializers.BooleanField(required=False)
    send_date = serializers.JSONField(required=False)
    mes = serializers.CharField(allow_blank=True, trim_whitespace=False)
    extra = DictField(required=False)
    swipes = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False, allow_null=True
    )
    swipe_id = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False, allow_null=True)
    swipe_info = serializers.ListField(child=DictField(), required=False, allow_null=True)
    other_fields = DictField(required=False, help_text="Replaces all keys beyond the known ones.")


class MessageWriteOutputSerializer(serializers.Serializer):
    message = MessageOutputSerializer()
    integrity = serializers.UUIDField()
    total_messages = serializers.IntegerField()


class ChatWriteOutputSerializer(serializers.Serializer):
    integrity = serializers.UUIDField()
    total_messages = serializers.IntegerField()


class MessagePageSerializer(serializers.Serializer):
    from_index = serializers.IntegerField()
    next_index = serializers.IntegerField(allow_null=True)
    total_messages = serializers.IntegerField()
    has_more = serializers.BooleanField()
    integrity = serializers.UUIDField()
    results = MessageOutputSerializer(many=True)


class MessageQuerySerializer(serializers.Serializer):
    from_index = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=selectors.MAX_PAGE, default=100)


def _write_answer(message: Message | None, chat) -> dict:
    answer = {"integrity": chat.integrity, "total_messages": chat.message_count}
    if message is not None:
        answer["message"] = MessageOutputSerializer(message).data
    return answer


class MessageListApi(APIView):
    @extend_schema(operation_id="messages_list", parameters=[MessageQuerySerializer], responses=MessagePageSerializer)
    def get(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        query = MessageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        from_index, limit = query.validated_data["from_index"], query.validated_data["limit"]
        messages = selectors.message_page(chat=chat, from_index=from_index, limit=limit)
        next_index = from_index + len(messages)
        has_more = next_index < chat.message_count
        page = {
            "from_index": from_index,
            "next_index": next_index if has_more else None,
            "total_messages": chat.message_count,
            "has_more": has_more,
            "integrity": chat.integrity,
            "results": messages,
        }
        return Response(MessagePageSerializer(page).data)

    @extend_schema(
        operation_id="messages_create", request=MessageInputSerializer, responses={201: MessageWriteOutputSerializer}
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = MessageInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        integrity = request_integrity(request, required=True)
        message, chat = message_append(chat=chat, data=serializer.validated_data, integrity=integrity)
        return with_etag(Response(_write_answer(message, chat), status=status.HTTP_201_CREATED), chat.integrity)


class MessageDetailApi(APIView):
    @extend_schema(operation_id="messages_retrieve", responses=MessageOutputSerializer)
    def get(self, request, chat_id: int, index: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        return Response(MessageOutputSerializer(selectors.message_get(chat=chat, index=index)).data)

    @extend_schema(
        operation_id="messages_update", request=MessageInputSerializer, responses=MessageWriteOutputSerializer
    )
    @idempotent
    def patch(self, request, chat_id: int, index: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        selectors.message_get(chat=chat, index=index)
        serializer = MessageInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        message, chat = message_update(
            chat=chat, index=index, data=serializer.validated_data, integrity=request_integrity(request, required=True)
        )
        return with_etag(Response(_write_answer(message, chat)), chat.integrity)

    @extend_schema(operation_id="messages_destroy", responses=ChatWriteOutputSerializer)
    @idempotent
    def delete(self, request, chat_id: int, index: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        selectors.message_get(chat=chat, index=index)
        chat = message_delete(chat=chat, index=index, integrity=request_integrity(request, required=True))
        return with_etag(Response(_write_answer(None, chat)), chat.integrity)
