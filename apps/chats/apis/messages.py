"""Messages of a chat: paged reads and single-message writes (with If-Match)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis.common import ChatStateSerializer, chat_state
from apps.chats.models import Message
from apps.chats.services.messages import message_append, message_delete, message_update
from apps.common.idempotency import idempotent
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH_REQUIRED, request_integrity, with_etag
from apps.common.serializers import INT_MAX, DictField, JSONField, StorableInputSerializer

MAX_SWIPES = 10_000  # per message: far beyond what anyone regenerates, and cheap to check each


class MessageOutputSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    name = serializers.CharField()
    is_user = serializers.BooleanField()
    is_system = serializers.BooleanField()
    send_date = JSONField()
    mes = serializers.CharField()
    extra = serializers.DictField()
    swipes = JSONField()
    swipe_id = serializers.IntegerField(allow_null=True)
    swipe_info = JSONField()
    other_fields = serializers.DictField(help_text="Keys of the SillyTavern message beyond the ones above.")


class MessageInputSerializer(StorableInputSerializer):
    name = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    is_user = serializers.BooleanField(required=False)
    is_system = serializers.BooleanField(required=False)
    send_date = JSONField(required=False)
    mes = serializers.CharField(allow_blank=True, trim_whitespace=False)
    extra = DictField(required=False)
    swipes = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        allow_null=True,
        max_length=MAX_SWIPES,
    )
    swipe_id = serializers.IntegerField(min_value=0, max_value=INT_MAX, required=False, allow_null=True)
    swipe_info = serializers.ListField(child=DictField(), required=False, allow_null=True, max_length=MAX_SWIPES)
    other_fields = DictField(required=False, help_text="Replaces all keys beyond the known ones.")


class MessageWriteOutputSerializer(ChatStateSerializer):
    message = MessageOutputSerializer()


class ChatWriteOutputSerializer(ChatStateSerializer):
    pass


class MessagePageSerializer(ChatStateSerializer):
    from_index = serializers.IntegerField()
    next_index = serializers.IntegerField(allow_null=True)
    has_more = serializers.BooleanField()
    results = MessageOutputSerializer(many=True)


class MessageQuerySerializer(serializers.Serializer):
    from_index = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=selectors.MAX_PAGE, default=100)


def _write_answer(message: Message | None, chat) -> dict:
    answer = chat_state(chat)
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
            "has_more": has_more,
            "results": messages,
            **chat_state(chat),
        }
        return Response(MessagePageSerializer(page).data)

    @extend_schema(
        operation_id="messages_create",
        request=MessageInputSerializer,
        responses={201: MessageWriteOutputSerializer},
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY],
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
        operation_id="messages_update",
        request=MessageInputSerializer,
        responses=MessageWriteOutputSerializer,
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY],
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

    @extend_schema(
        operation_id="messages_destroy",
        responses=ChatWriteOutputSerializer,
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY],
    )
    @idempotent
    def delete(self, request, chat_id: int, index: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        selectors.message_get(chat=chat, index=index)
        chat = message_delete(chat=chat, index=index, integrity=request_integrity(request, required=True))
        return with_etag(Response(_write_answer(None, chat)), chat.integrity)
