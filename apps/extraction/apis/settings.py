"""Extraction settings and the extraction model test over the API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import paginated, patch_checked
from apps.extraction import selectors
from apps.extraction.models import AutoChoice, ExtractionSettings, ModelTest
from apps.extraction.services.model_test import model_test_start
from apps.extraction.services.settings import extraction_settings_get, extraction_settings_set
from apps.llm import selectors as llm_selectors
from apps.llm.selectors import daily_limit


class ExtractionSettingsSerializer(serializers.ModelSerializer):
    daily_token_limit = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1000,
        max_value=10**12,
        help_text="Prompt and reply tokens a day for background work; past it, it pauses until midnight. null: none.",
    )
    canon_auto = serializers.ChoiceField(choices=AutoChoice.choices, required=False)
    continuity_auto = serializers.ChoiceField(choices=AutoChoice.choices, required=False)

    class Meta:
        model = ExtractionSettings
        ref_name = "ExtractionSettings"
        fields = [
            "enabled",
            "auto_extract",
            "daily_token_limit",
            "batch_every",
            "batch_max",
            "context_tokens",
            "compaction_share",
            "scene_model_check",
            "min_scene_messages",
            "profile_every",
            "profile_stale_minutes",
            "canon_auto",
            "continuity_auto",
            "recap_after_hours",
            "auto_rebuild_max",
        ]
        extra_kwargs = {name: {"required": False} for name in fields}

    def to_representation(self, instance: ExtractionSettings) -> dict:
        return super().to_representation(instance) | {"daily_token_limit": daily_limit(user_id=instance.user_id)}


class ExtractionSettingsApi(APIView):
    @extend_schema(operation_id="extraction_settings_retrieve", responses=ExtractionSettingsSerializer)
    def get(self, request):
        return Response(ExtractionSettingsSerializer(extraction_settings_get(user=request.user)).data)

    @extend_schema(
        operation_id="extraction_settings_update",
        request=ExtractionSettingsSerializer,
        responses=ExtractionSettingsSerializer,
        description="Change any of the settings (those not given keep their value).",
    )
    @idempotent
    def put(self, request):
        serializer = patch_checked(
            ExtractionSettingsSerializer,
            request.data,
            answered=ExtractionSettingsSerializer(extraction_settings_get(user=request.user)).data,
        )
        own = extraction_settings_set(user=request.user, data=serializer.validated_data)
        return Response(ExtractionSettingsSerializer(own).data)


class ModelTestOutputSerializer(serializers.ModelSerializer):
    results = serializers.ListField(child=serializers.DictField(), help_text="Per scenario, per tier.")

    class Meta:
        model = ModelTest
        ref_name = "ExtractionModelTest"
        fields = [
            "id",
            "connection",
            "connection_name",
            "model",
            "profile",
            "state",
            "progress",
            "results",
            "error",
            "created_at",
            "finished_at",
        ]


class ModelTestInputSerializer(serializers.Serializer):
    connection = serializers.IntegerField(min_value=1)

    class Meta:
        ref_name = "ExtractionModelTestInput"


class ModelTestListApi(APIView):
    @extend_schema(operation_id="model_tests_list", responses=paginated(ModelTestOutputSerializer))
    def get(self, request):
        paginator = ListPagination()
        page = paginator.paginate_queryset(selectors.model_test_list(user=request.user), request, view=self)
        return paginator.get_paginated_response(ModelTestOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="model_tests_create",
        request=ModelTestInputSerializer,
        responses={202: ModelTestOutputSerializer},
        description="Run the three fixed scenarios (an investigation, a healer scene, a heist) through every tier "
        "against a connection, in the background; nothing is written but this test's record. Poll it for the raw "
        "answers, what parsed, and hints on the quality.",
    )
    @idempotent
    def post(self, request):
        serializer = ModelTestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        connection = llm_selectors.connection_get(
            user=request.user, connection_id=serializer.validated_data["connection"]
        )
        test = model_test_start(user=request.user, connection=connection)
        test = selectors.model_test_get(user=request.user, test_id=test.pk)
        return Response(ModelTestOutputSerializer(test).data, status=status.HTTP_202_ACCEPTED)


class ModelTestDetailApi(APIView):
    @extend_schema(operation_id="model_tests_retrieve", responses=ModelTestOutputSerializer)
    def get(self, request, test_id: int):
        return Response(ModelTestOutputSerializer(selectors.model_test_get(user=request.user, test_id=test_id)).data)
