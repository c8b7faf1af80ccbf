"""The per-user settings document over the API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.services import settings_document_get, settings_document_patch
from apps.chats.apis.common import PATCH_PARSERS, PATCH_REQUEST_BODIES, patch_kind
from apps.common.idempotency import idempotent
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH_REQUIRED, request_integrity, with_etag


class SettingsOutputSerializer(serializers.Serializer):
    settings = serializers.DictField(help_text="One object per extension namespace.")
    integrity = serializers.UUIDField()


class SettingsApi(APIView):
    parser_classes = PATCH_PARSERS

    @extend_schema(operation_id="settings_retrieve", responses=SettingsOutputSerializer)
    def get(self, request):
        document = settings_document_get(user=request.user)
        body = {"settings": document.data, "integrity": document.integrity}
        return with_etag(Response(SettingsOutputSerializer(body).data), document.integrity)

    @extend_schema(
        operation_id="settings_patch",
        request=PATCH_REQUEST_BODIES,
        responses=SettingsOutputSerializer,
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY],
    )
    @idempotent
    def patch(self, request):
        document = settings_document_patch(
            user=request.user,
            patch=request.data,
            kind=patch_kind(request),
            integrity=request_integrity(request, required=True),
        )
        body = {"settings": document.data, "integrity": document.integrity}
        return with_etag(Response(SettingsOutputSerializer(body).data), document.integrity)
