"""Memories over the API: listed, created (through classification), changed, retired, and their history. Search,
entities and embedding settings are in the sibling modules."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.chats.apis.common import parse_ids
from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import INT_MAX, DictField, MomentField, StorableInputSerializer, paginated, patch_checked
from apps.memories import selectors
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle.classify import Candidate, Classified, memories_submit
from apps.memories.services.memories import memory_retire, memory_update

INSTANCE_HEADER = "HTTP_X_LOREKEEPER_INSTANCE"
WRITABLE_KINDS = [k for k in Kind.values if k != Kind.MESSAGE]
MAX_ENTITIES = 50  # per memory, here and in a sync push
MAX_ALIASES = 50  # per entity


class EntityRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()


class MemoryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uid = serializers.UUIDField(help_text="Its id in multi-instance sync.")
    kind = serializers.CharField()
    content = serializers.CharField()
    character = serializers.IntegerField(source="character_id", allow_null=True)
    chat = serializers.IntegerField(source="chat_id", allow_null=True)
    status = serializers.CharField()
    retired_reason = serializers.CharField()
    importance = serializers.IntegerField()
    confidence = serializers.FloatField()
    unconfirmed_count = serializers.IntegerField()
    time_scope = serializers.CharField()
    valid_from = serializers.IntegerField(allow_null=True)
    valid_to = serializers.IntegerField(allow_null=True)
    supersedes = serializers.SerializerMethodField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    contradicts = serializers.SerializerMethodField()
    source_chat = serializers.IntegerField(source="source_chat_id", allow_null=True)
    source_message_indices = serializers.ListField(child=serializers.IntegerField())
    entities = EntityRefSerializer(many=True, source="entities.all")
    source_instance = serializers.CharField()
    participating_instances = serializers.ListField(child=serializers.CharField())
    clock = serializers.DictField(child=serializers.IntegerField(), help_text="Its vector clock (sync).")
    edited_by = serializers.CharField(help_text="Who last corrected it by hand: an instance, web, api or admin.")
    origin = serializers.CharField(help_text="What wrote it: api, extraction, consolidation, hierarchy.")
    occurred_at = serializers.DateTimeField(allow_null=True)
    embedding_model = serializers.CharField()
    data = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    version = serializers.IntegerField()

    class Meta:
        ref_name = "Memory"

    def get_supersedes(self, memory: Memory) -> list[int]:
        return sorted(m.pk for m in memory.supersedes.all())

    def get_contradicts(self, memory: Memory) -> list[int]:
        return sorted(m.pk for m in memory.contradicts.all())


class DecisionOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    outcome = serializers.CharField()
    outcome_display = serializers.CharField(source="get_outcome_display")
    memory = serializers.IntegerField(source="memory_id", allow_null=True)
    related = serializers.IntegerField(source="related_id", allow_null=True)
    kind = serializers.CharField()
    content = serializers.CharField(help_text="The candidate's text.")
    method = serializers.CharField()
    similarity = serializers.FloatField(allow_null=True)
    scores = serializers.DictField()
    reason = serializers.CharField()
    llm_call = serializers.IntegerField(source="llm_call_id", allow_null=True)
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "MemoryDecision"


class SubmittedMemorySerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=Decision.Outcome.values)
    memory = MemoryOutputSerializer(allow_null=True, help_text="The stored memory, or the re-confirmed one.")
    related = serializers.IntegerField(allow_null=True)
    decision = DecisionOutputSerializer()

    class Meta:
        ref_name = "SubmittedMemory"


class MemoryCreatedSerializer(MemoryOutputSerializer):
    decision = DecisionOutputSerializer(help_text="How the candidate was classified, with its scores.")

    class Meta:
        ref_name = "MemoryCreated"


def submitted_output(result: Classified, *, user) -> dict:
    shown = result.memory or result.related
    memory = selectors.memory_linked_get(user=user, memory_id=shown.pk) if shown else None
    return {
        "outcome": result.outcome,
        "memory": MemoryOutputSerializer(memory).data if memory else None,
        "related": result.related.pk if result.related else None,
        "decision": DecisionOutputSerializer(result.decision).data,
    }


class EntityInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=200)
    type = serializers.CharField(max_length=50, required=False, allow_blank=True)
    aliases = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=MAX_ALIASES
    )

    class Meta:
        ref_name = "EntityInput"


class MemoryCreateInputSerializer(StorableInputSerializer):
    character = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    chat = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    kind = serializers.ChoiceField(choices=WRITABLE_KINDS)
    content = serializers.CharField(max_length=50_000)
    importance = serializers.IntegerField(required=False, min_value=1, max_value=3)
    confidence = serializers.FloatField(required=False, min_value=0, max_value=1)
    time_scope = serializers.ChoiceField(choices=["", "scene", "session", "permanent"], required=False)
    valid_from = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=INT_MAX)
    valid_to = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=INT_MAX)
    source_message_indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=INT_MAX), required=False, max_length=1000
    )
    occurred_at = MomentField(required=False, allow_null=True)
    entities = EntityInputSerializer(many=True, required=False, max_length=MAX_ENTITIES)
    data = DictField(required=False)

    class Meta:
        ref_name = "MemoryCreateInput"

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if attrs.get("valid_from") is not None and attrs.get("valid_to") is not None:
            if attrs["valid_to"] < attrs["valid_from"]:
                raise serializers.ValidationError({"valid_to": ["Must not be before valid_from."]})
        return attrs


class MemoryUpdateInputSerializer(MemoryCreateInputSerializer):
    class Meta:
        ref_name = "MemoryUpdateInput"

    def get_fields(self):
        fields = super().get_fields()
        for name in ("character", "chat", "source_message_indices", "occurred_at"):
            fields.pop(name)
        return fields


def scope_objects(user, data: dict) -> tuple:
    character = chat = None
    if data.get("character"):
        character = chat_selectors.character_get(user=user, character_id=data["character"])
    if data.get("chat"):
        chat = chat_selectors.chat_get(user=user, chat_id=data["chat"])
    return character, chat


def int_param(request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    ids = parse_ids([value], name)
    if len(ids) != 1:
        raise ApplicationError(f"Give one id in `{name}`.", {"field": name})
    return ids[0]


def kinds_param(values: list[str]) -> list[str]:
    kinds = [k.strip() for value in values for k in value.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in Kind.values]
    if unknown:
        raise ApplicationError("Unknown memory kind(s).", {"field": "kind", "kinds": unknown})
    return kinds


LIST_PARAMETERS = [
    OpenApiParameter("character", int, description="A character's memories, and those of its chats."),
    OpenApiParameter("chat", int, description="A chat's memories and its characters' persistent ones."),
    OpenApiParameter("kind", str, description="Comma-separated kinds (repeatable)."),
    OpenApiParameter("status", str, enum=Status.values),
    OpenApiParameter("entity", int, description="Only memories linked to this entity."),
]


def listed(request):
    """The memories the list's query parameters select."""
    status_value = request.query_params.get("status") or None
    if status_value and status_value not in Status.values:
        raise ApplicationError("Unknown status.", {"field": "status", "allowed": Status.values})
    return selectors.memory_list(
        user=request.user,
        character_id=int_param(request, "character"),
        chat_id=int_param(request, "chat"),
        kinds=kinds_param(request.query_params.getlist("kind")),
        status=status_value,
        entity_id=int_param(request, "entity"),
    )


class MemoryCountSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    by_kind = serializers.DictField(child=serializers.IntegerField())


class MemoryCountApi(APIView):
    @extend_schema(
        operation_id="memories_count",
        parameters=LIST_PARAMETERS,
        responses=MemoryCountSerializer,
        description="How many memories the list with the same parameters holds, in all and by kind (the list "
        "itself pages by cursor and does not count).",
    )
    def get(self, request):
        by_kind = selectors.memory_counts_by_kind(queryset=listed(request))
        return Response({"count": sum(by_kind.values()), "by_kind": by_kind})


class MemoryListApi(APIView):
    @extend_schema(
        operation_id="memories_list", parameters=LIST_PARAMETERS, responses=paginated(MemoryOutputSerializer)
    )
    def get(self, request):
        qs = listed(request)
        paginator = ListPagination()
        page = paginator.paginate_queryset(selectors.with_links(qs), request, view=self)
        return paginator.get_paginated_response(MemoryOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="memories_create",
        request=MemoryCreateInputSerializer,
        responses={201: MemoryCreatedSerializer, 200: MemoryCreatedSerializer},
        description="The candidate is classified first (deduplication, supersession, contradiction; see "
        "`memories/submit`). 201: stored, with the decision; 200: rejected as a duplicate, answering the existing "
        "memory it re-confirmed.",
    )
    @idempotent
    def post(self, request):
        serializer = MemoryCreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        character, chat = scope_objects(request.user, data)
        data.pop("character", None)
        data.pop("chat", None)
        candidate = Candidate(source_instance=request.META.get(INSTANCE_HEADER, "")[:100], origin="api", **data)
        [result] = memories_submit(
            user=request.user, candidates=[candidate], character=character, chat=chat, interactive=True
        )
        shown = selectors.memory_linked_get(user=request.user, memory_id=(result.memory or result.related).pk)
        body = {**MemoryOutputSerializer(shown).data, "decision": DecisionOutputSerializer(result.decision).data}
        return Response(body, status=status.HTTP_200_OK if result.memory is None else status.HTTP_201_CREATED)


class MemoryDetailApi(APIView):
    @extend_schema(operation_id="memories_retrieve", responses=MemoryOutputSerializer)
    def get(self, request, memory_id: int):
        memory = selectors.memory_get(user=request.user, memory_id=memory_id)
        return Response(
            MemoryOutputSerializer(selectors.memory_linked_get(user=request.user, memory_id=memory.pk)).data
        )

    @extend_schema(
        operation_id="memories_update", request=MemoryUpdateInputSerializer, responses=MemoryOutputSerializer
    )
    @idempotent
    def patch(self, request, memory_id: int):
        memory = selectors.memory_get(user=request.user, memory_id=memory_id)
        serializer = patch_checked(
            MemoryUpdateInputSerializer, request.data, answered=MemoryOutputSerializer(memory).data
        )
        data = dict(serializer.validated_data)
        entities = data.pop("entities", None)
        edited_by = request.META.get(INSTANCE_HEADER, "")[:64] or "api"
        memory = memory_update(memory=memory, data=data, entities=entities, edited_by=edited_by)
        return Response(
            MemoryOutputSerializer(selectors.memory_linked_get(user=request.user, memory_id=memory.pk)).data
        )

    @extend_schema(
        operation_id="memories_destroy",
        description="Retires the memory: it leaves search and injection but keeps its place in history.",
        responses=MemoryOutputSerializer,
    )
    @idempotent
    def delete(self, request, memory_id: int):
        memory = memory_retire(memory=selectors.memory_get(user=request.user, memory_id=memory_id))
        return Response(
            MemoryOutputSerializer(selectors.memory_linked_get(user=request.user, memory_id=memory.pk)).data
        )


class MemoryHistoryApi(APIView):
    @extend_schema(
        operation_id="memories_history",
        description="The supersession chain through this memory, oldest first.",
        responses=MemoryOutputSerializer(many=True),
    )
    def get(self, request, memory_id: int):
        memory = selectors.memory_get(user=request.user, memory_id=memory_id)
        chain = selectors.memory_history(memory=memory)
        by_pk = selectors.memories_linked(user=request.user, memory_ids=[m.pk for m in chain])
        return Response({"results": MemoryOutputSerializer([by_pk[m.pk] for m in chain], many=True).data})
