"""Entities and a user's own embedding settings over the API."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import StorableInputSerializer, paginated, patch_checked
from apps.memories import selectors
from apps.memories.apis.memories import (
    EntityInputSerializer,
    MemoryOutputSerializer,
    int_param,
)
from apps.memories.models import Entity
from apps.memories.services.entities import entity_merge, entity_update
from apps.memories.services.settings import embedding_settings_get, embedding_settings_set


class EntityOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    character = serializers.IntegerField(source="character_id", allow_null=True)
    memory_count = serializers.IntegerField(required=False, help_text="Active memories linked to it.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Entity"


class EntityDetailOutputSerializer(EntityOutputSerializer):
    memories = serializers.SerializerMethodField()

    class Meta:
        ref_name = "EntityDetail"

    @extend_schema_field(MemoryOutputSerializer(many=True))
    def get_memories(self, entity: Entity) -> list[dict]:
        return MemoryOutputSerializer(selectors.entity_memories(entity=entity), many=True).data


class EntityListApi(APIView):
    @extend_schema(
        operation_id="entities_list",
        parameters=[
            OpenApiParameter("character", int, description="That character's registry and the user-wide one."),
            OpenApiParameter("search", str),
        ],
        responses=paginated(EntityOutputSerializer),
    )
    def get(self, request):
        qs = selectors.entity_list(
            user=request.user,
            character_id=int_param(request, "character"),
            search=request.query_params.get("search", ""),
        )
        paginator = ListPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(EntityOutputSerializer(page, many=True).data)


class EntityUpdateInputSerializer(EntityInputSerializer):
    class Meta:
        ref_name = "EntityUpdateInput"


class EntityMergeInputSerializer(serializers.Serializer):
    into = serializers.IntegerField(min_value=1, help_text="The entity of the same registry that is kept.")

    class Meta:
        ref_name = "EntityMergeInput"


class EntityDetailApi(APIView):
    @extend_schema(operation_id="entities_retrieve", responses=EntityDetailOutputSerializer)
    def get(self, request, entity_id: int):
        entity = selectors.entity_get(user=request.user, entity_id=entity_id)
        return Response(EntityDetailOutputSerializer(entity).data)

    @extend_schema(
        operation_id="entities_update",
        request=EntityUpdateInputSerializer,
        responses=EntityDetailOutputSerializer,
        description="Change the name, type or aliases. A new name keeps the old one as an alias (unless `aliases` "
        "is given too: then that list is the whole list); a name another entity of the registry has, as its name or "
        "an alias, is refused (400, `extra.field` `name`, `extra.entity` that entity): merge the two instead.",
    )
    @idempotent
    def patch(self, request, entity_id: int):
        entity = selectors.entity_get(user=request.user, entity_id=entity_id)
        serializer = patch_checked(
            EntityUpdateInputSerializer, request.data, answered=EntityDetailOutputSerializer(entity).data
        )
        entity = entity_update(user=request.user, entity=entity, data=serializer.validated_data)
        return Response(EntityDetailOutputSerializer(entity).data)


class EntityMergeApi(APIView):
    @extend_schema(
        operation_id="entities_merge",
        request=EntityMergeInputSerializer,
        responses=EntityDetailOutputSerializer,
        description="Merge this entity into `into`, another entity of the same registry: its memories are linked "
        "to `into`, its name and aliases become aliases of `into`, and it is deleted. Answers the entity kept.",
    )
    @idempotent
    def post(self, request, entity_id: int):
        entity = selectors.entity_get(user=request.user, entity_id=entity_id)
        serializer = EntityMergeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        into = selectors.entity_find(user=request.user, entity_id=serializer.validated_data["into"])
        if into is None:
            raise ApplicationError("No such entity.", {"field": "into"})
        kept = entity_merge(user=request.user, keep=into, merge=entity)
        return Response(EntityDetailOutputSerializer(kept).data)


class EmbeddingSettingsSerializer(StorableInputSerializer):
    provider = serializers.ChoiceField(choices=["deployment", "local", "openai", "ollama", "none"])
    model = serializers.CharField(required=False, allow_blank=True, max_length=200)
    base_url = serializers.URLField(required=False, allow_blank=True, max_length=500)
    api_key = serializers.CharField(
        required=False, allow_blank=True, max_length=500, write_only=True, help_text="Stored encrypted; never shown."
    )
    dimensions = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=4096)
    model_key = serializers.CharField(read_only=True, help_text="What vectors made now are labelled with.")
    has_api_key = serializers.BooleanField(read_only=True)

    class Meta:
        ref_name = "EmbeddingSettings"


class EmbeddingSettingsApi(APIView):
    @extend_schema(operation_id="embedding_settings_retrieve", responses=EmbeddingSettingsSerializer)
    def get(self, request):
        return Response(EmbeddingSettingsSerializer(embedding_settings_get(user=request.user)).data)

    @extend_schema(
        operation_id="embedding_settings_update",
        request=EmbeddingSettingsSerializer,
        responses=EmbeddingSettingsSerializer,
        description="Choose your own embedding provider (`deployment` goes back to the server's). Changing the "
        "model re-embeds your memories in the background; until then search falls back to text for them.",
    )
    @idempotent
    def put(self, request):
        serializer = EmbeddingSettingsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        view = embedding_settings_set(user=request.user, **serializer.validated_data)
        return Response(EmbeddingSettingsSerializer(view).data)
