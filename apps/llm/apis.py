"""A user's LLM connections: list, create, change, delete, test; their sampler presets; and the record of recent
calls."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import DictField, StorableInputSerializer, paginated, patch_checked
from apps.llm import selectors
from apps.llm.models import Call, Connection, SamplerPreset
from apps.llm.sampler import INTEGERS, RANGES, REPLY_TOKENS_MAX, STOP_LENGTH, STOP_MAX
from apps.llm.services import (
    connection_create,
    connection_delete,
    connection_test,
    connection_update,
    sampler_preset_delete,
    sampler_preset_save,
)


def _sampler_schema() -> serializers.Serializer:
    """The sampler object as the schema shows it, from the ranges `sampler_clean` checks (it alone checks them)."""
    fields = {
        key: (serializers.IntegerField if key in INTEGERS else serializers.FloatField)(
            required=False, min_value=low, max_value=high
        )
        for key, (low, high) in RANGES.items()
    }
    fields["stop"] = serializers.ListField(
        child=serializers.CharField(max_length=STOP_LENGTH, trim_whitespace=False), max_length=STOP_MAX, required=False
    )
    return inline_serializer(name="LlmSampler", fields=fields)


@extend_schema_field(_sampler_schema())
class SamplerField(DictField):
    """The samplers a person set, any of the keys in apps/llm/sampler.py; an absent key is the model's default."""


class ConnectionOutputSerializer(serializers.ModelSerializer):
    effective_profile = serializers.CharField(read_only=True)
    has_api_key = serializers.SerializerMethodField()
    sampler = SamplerField()

    class Meta:
        model = Connection
        ref_name = "LlmConnection"
        fields = [
            "id",
            "name",
            "api",
            "base_url",
            "model",
            "has_api_key",
            "api_key_hint",
            "profile",
            "effective_profile",
            "context_window",
            "timeout",
            "reply_tokens",
            "sampler",
            "is_default",
            "price_prompt",
            "price_reply",
            "last_tested_at",
            "last_test_ok",
            "last_test_message",
            "created_at",
            "updated_at",
        ]

    def get_has_api_key(self, connection: Connection) -> bool:
        return bool(connection.api_key_encrypted)


class ConnectionInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=100)
    api = serializers.ChoiceField(choices=Connection.Api.choices, default=Connection.Api.OPENAI)
    base_url = serializers.URLField(max_length=500)
    model = serializers.CharField(max_length=200)
    api_key = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        write_only=True,
        help_text='Stored encrypted, never shown back. Omit to keep the stored key, "" to clear it.',
    )
    profile = serializers.ChoiceField(choices=Connection.ProfileChoice.choices, default="auto")
    context_window = serializers.IntegerField(required=False, allow_null=True, min_value=512, max_value=10_000_000)
    timeout = serializers.FloatField(required=False, allow_null=True, min_value=1, max_value=600)
    reply_tokens = serializers.IntegerField(required=False, min_value=1, max_value=REPLY_TOKENS_MAX)
    sampler = SamplerField(required=False, help_text="Replaces the stored samplers whole; {} clears them.")
    is_default = serializers.BooleanField(
        required=False, help_text="Use this connection for background memory work (never without this)."
    )
    price_prompt = serializers.DecimalField(
        max_digits=10, decimal_places=4, min_value=0, max_value=100_000, required=False, allow_null=True,
        help_text="Price per million prompt tokens, for the estimates before background work.",
    )  # fmt: skip
    price_reply = serializers.DecimalField(
        max_digits=10, decimal_places=4, min_value=0, max_value=100_000, required=False, allow_null=True,
        help_text="Price per million reply tokens.",
    )  # fmt: skip

    class Meta:
        ref_name = "LlmConnectionInput"


class ConnectionListOutputSerializer(serializers.Serializer):
    results = ConnectionOutputSerializer(many=True)

    class Meta:
        ref_name = "LlmConnectionList"


class ConnectionListApi(APIView):
    @extend_schema(operation_id="llm_connections_list", responses=ConnectionListOutputSerializer)
    def get(self, request):
        connections = selectors.connection_list(user=request.user)
        return Response({"results": ConnectionOutputSerializer(connections, many=True).data})

    @extend_schema(
        operation_id="llm_connections_create",
        request=ConnectionInputSerializer,
        responses={201: ConnectionOutputSerializer},
    )
    @idempotent
    def post(self, request):
        serializer = ConnectionInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        connection = connection_create(user=request.user, api_key=data.pop("api_key", ""), **data)
        return Response(ConnectionOutputSerializer(connection).data, status=status.HTTP_201_CREATED)


class ConnectionDetailApi(APIView):
    @extend_schema(operation_id="llm_connections_retrieve", responses=ConnectionOutputSerializer)
    def get(self, request, connection_id: int):
        connection = selectors.connection_get(user=request.user, connection_id=connection_id)
        return Response(ConnectionOutputSerializer(connection).data)

    @extend_schema(
        operation_id="llm_connections_update", request=ConnectionInputSerializer, responses=ConnectionOutputSerializer
    )
    @idempotent
    def patch(self, request, connection_id: int):
        connection = selectors.connection_get(user=request.user, connection_id=connection_id)
        serializer = patch_checked(
            ConnectionInputSerializer, request.data, answered=ConnectionOutputSerializer(connection).data
        )
        data = dict(serializer.validated_data)
        api_key = data.pop("api_key", None)
        connection = connection_update(connection=connection, data=data, api_key=api_key)
        return Response(ConnectionOutputSerializer(connection).data)

    @extend_schema(operation_id="llm_connections_destroy", responses={204: None})
    @idempotent
    def delete(self, request, connection_id: int):
        connection_delete(connection=selectors.connection_get(user=request.user, connection_id=connection_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConnectionTestApi(APIView):
    @extend_schema(
        operation_id="llm_connections_test",
        request=None,
        responses=ConnectionOutputSerializer,
        description="Asks the model for a one-word answer; `last_test_ok` and `last_test_message` tell the outcome "
        "(the call itself is in `llm/calls`).",
    )
    def post(self, request, connection_id: int):
        connection = selectors.connection_get(user=request.user, connection_id=connection_id)
        return Response(ConnectionOutputSerializer(connection_test(connection=connection)).data)


class CallOutputSerializer(serializers.ModelSerializer):
    connection = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = Call
        ref_name = "LlmCall"
        fields = [
            "id",
            "connection",
            "purpose",
            "template",
            "model",
            "status",
            "error",
            "attempts",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "tokens_estimated",
            "response",
            "reasoning",
            "created_at",
        ]


class CallListApi(APIView):
    @extend_schema(
        operation_id="llm_calls_list",
        parameters=[OpenApiParameter("status", str, enum=Call.Status.values)],
        responses=paginated(CallOutputSerializer),
    )
    def get(self, request):
        status_value = request.query_params.get("status") or None
        if status_value and status_value not in Call.Status.values:
            raise ApplicationError("Unknown status.", {"field": "status", "allowed": Call.Status.values})
        paginator = ListPagination()
        page = paginator.paginate_queryset(
            selectors.call_list(user=request.user, status=status_value), request, view=self
        )
        return paginator.get_paginated_response(CallOutputSerializer(page, many=True).data)


class PresetOutputSerializer(serializers.ModelSerializer):
    values = SamplerField()

    class Meta:
        model = SamplerPreset
        ref_name = "LlmSamplerPreset"
        fields = ["id", "name", "values", "created_at"]


class PresetInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=100)
    values = SamplerField()

    class Meta:
        ref_name = "LlmSamplerPresetInput"


class PresetListOutputSerializer(serializers.Serializer):
    results = PresetOutputSerializer(many=True)

    class Meta:
        ref_name = "LlmSamplerPresetList"


class PresetListApi(APIView):
    @extend_schema(operation_id="llm_presets_list", responses=PresetListOutputSerializer)
    def get(self, request):
        presets = selectors.sampler_preset_list(user=request.user)
        return Response({"results": PresetOutputSerializer(presets, many=True).data})

    @extend_schema(
        operation_id="llm_presets_create",
        request=PresetInputSerializer,
        responses={201: PresetOutputSerializer},
        description="Keeps sampler values under a name; a preset of the same name (in any case) is saved over. "
        "To put a preset on a connection, PATCH the connection's `sampler` with the preset's `values`.",
    )
    @idempotent
    def post(self, request):
        serializer = PresetInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        preset = sampler_preset_save(user=request.user, **serializer.validated_data)
        return Response(PresetOutputSerializer(preset).data, status=status.HTTP_201_CREATED)


class PresetDetailApi(APIView):
    @extend_schema(operation_id="llm_presets_destroy", responses={204: None})
    @idempotent
    def delete(self, request, preset_id: int):
        sampler_preset_delete(preset=selectors.sampler_preset_get(user=request.user, preset_id=preset_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
