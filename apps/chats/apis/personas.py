"""Personas: who the person plays in a chat."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.services.personas import persona_create, persona_delete, persona_update
from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import StorableInputSerializer, paginated, patch_checked


class PersonaOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    is_default = serializers.BooleanField()
    lorebook = serializers.CharField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Persona"


class PersonaInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    is_default = serializers.BooleanField(
        required=False, help_text="New chats start with it; making it the default unmakes the one that was."
    )
    lorebook = serializers.CharField(
        max_length=200, allow_blank=True, required=False, help_text="The lorebook its chats scan too, by name."
    )

    class Meta:
        ref_name = "PersonaInput"


class PersonaListApi(APIView):
    @extend_schema(operation_id="personas_list", responses=paginated(PersonaOutputSerializer))
    def get(self, request):
        paginator = ListPagination()
        page = paginator.paginate_queryset(selectors.persona_list(user=request.user), request, view=self)
        return paginator.get_paginated_response(PersonaOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="personas_create", request=PersonaInputSerializer, responses={201: PersonaOutputSerializer}
    )
    @idempotent
    def post(self, request):
        serializer = PersonaInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        persona = persona_create(user=request.user, **serializer.validated_data)
        return Response(PersonaOutputSerializer(persona).data, status=status.HTTP_201_CREATED)


class PersonaDetailApi(APIView):
    @extend_schema(operation_id="personas_retrieve", responses=PersonaOutputSerializer)
    def get(self, request, persona_id: int):
        persona = selectors.persona_get(user=request.user, persona_id=persona_id)
        return Response(PersonaOutputSerializer(persona).data)

    @extend_schema(operation_id="personas_update", request=PersonaInputSerializer, responses=PersonaOutputSerializer)
    @idempotent
    def patch(self, request, persona_id: int):
        persona = selectors.persona_get(user=request.user, persona_id=persona_id)
        serializer = patch_checked(
            PersonaInputSerializer, request.data, answered=PersonaOutputSerializer(persona).data
        )
        persona = persona_update(persona=persona, data=serializer.validated_data)
        return Response(PersonaOutputSerializer(persona).data)

    @extend_schema(operation_id="personas_destroy", responses={204: None})
    @idempotent
    def delete(self, request, persona_id: int):
        persona_delete(persona=selectors.persona_get(user=request.user, persona_id=persona_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
