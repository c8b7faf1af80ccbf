"""Per-message extension data: `message.extra[namespace]`, swipe-aware."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis.common import (
    WRITE_PARAMETERS,
    ChatStateSerializer,
    chat_state,
    valid,
)
from apps.chats.services.extension_data import extension_data_get, extension_data_set
from apps.common.idempotency import idempotent
from apps.common.integrity import request_integrity, with_etag
from apps.common.serializers import DictField, JSONField


class ExtensionDataOutputSerializer(ChatStateSerializer):
    index = serializers.IntegerField()
    namespace = serializers.CharField()
    data = JSONField(help_text="message.extra[namespace]")
    swipe_id = serializers.IntegerField(allow_null=True)
    swipe_data = JSONField(help_text="swipe_info[swipe_id].extra[namespace], the current swipe's copy")


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
        **chat_state(chat),
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
        data = valid(ExtensionDataInputSerializer, request.data)
        found, chat = extension_data_set(
            chat=chat,
            index=index,
            namespace=namespace,
            values=data["values"],
            integrity=request_integrity(request, request.data, required=True),
        )
        return _extension_answer(found, chat)
