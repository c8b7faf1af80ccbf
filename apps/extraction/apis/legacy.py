"""Importing a chat's legacy extension data (ST-BME, Smart Memory, auto-recap: docs/GLOSSARY.md) over the API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.common.serializers import DictField, StorableInputSerializer
from apps.extraction.services.legacy.run import chat_legacy_import, legacy_found


class LegacyFoundSerializer(serializers.Serializer):
    found = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Items not imported yet, by source: st_bme, smart_memory, auto_recap.",
    )

    class Meta:
        ref_name = "LegacyFound"


class LegacyImportInputSerializer(StorableInputSerializer):
    smart_memory_settings = DictField(
        required=False,
        help_text="SillyTavern's extension_settings.smart_memory (from settings.json): Smart Memory's long-term "
        "tier, which is not in the chat file.",
    )

    class Meta:
        ref_name = "LegacyImportInput"


class LegacyImportOutputSerializer(serializers.Serializer):
    imported = serializers.DictField(help_text="By source: how many imported, already imported, left out.")

    class Meta:
        ref_name = "LegacyImportOutput"


class ChatLegacyImportApi(APIView):
    @extend_schema(operation_id="chat_legacy_found", responses=LegacyFoundSerializer)
    def get(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        return Response({"found": legacy_found(chat=chat)})

    @extend_schema(
        operation_id="chat_legacy_import",
        request=LegacyImportInputSerializer,
        responses=LegacyImportOutputSerializer,
        description="Turn what SillyTavern memory extensions left in this chat (ST-BME's st_bme_graph, Smart "
        "Memory's smartMemory, auto-recap's per-message data) into memories. The chat itself is not changed; "
        "importing again adds only what is new.",
    )
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = LegacyImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        counts = chat_legacy_import(
            user=request.user, chat=chat, smart_memory_settings=serializer.validated_data.get("smart_memory_settings")
        )
        return Response({"imported": counts})
