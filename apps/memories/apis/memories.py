"""Memories (created through classification), their search and history, entities, and a user's own embedding
settings."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.chats.apis.common import parse_ids
from apps.common.exceptions import ApplicationError
from apps.common.serializers import DictField, StorableInputSerializer
from apps.memories import selectors
from apps.memories.models import Decision, Entity, Kind, Memory, Status
from apps.memories.search import MAX_LIMIT, memory_search
from apps.memories.services.lifecycle.classify import Candidate, Classified, memories_submit
from apps.memories.services.memories import entity_update, memory_retire, memory_update
from apps.memories.services.settings import embedding_settings_get, embedding_settings_set
from apps.sync.idempotency import idempotent

INSTANCE_HEADER = "HTTP_X_LOREKEEPER_INSTANCE"
WRITABLE_KINDS = [k for k in Kind.values if k != Kind.MESSAGE]


class MemoryPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-id"


class EntityRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()


class MemoryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
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


def _with_links(qs):
    return qs.prefetch_related(
        Prefetch("supersedes", queryset=Memory.objects.only("id", "superseded_by")),
        Prefetch("contradicts", queryset=Memory.objects.only("id")),
        Prefetch("entities", queryset=Entity.objects.only("id", "name", "type")),
    )


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


def submitted_output(result: Classified) -> dict:
    shown = result.memory or result.related
    memory = _with_links(Memory.objects.filter(pk=shown.pk)).get() if shown else None
    return {
        "outcome": result.outcome,
        "memory": MemoryOutputSerializer(memory).data if memory else None,
        "related": result.related.pk if result.related else None,
        "decision": DecisionOutputSerializer(result.decision).data,
    }


class EntityInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=200)
    type = serializers.CharField(max_length=50, required=False, allow_blank=True)
    aliases = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=50)

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
    valid_from = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    valid_to = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    source_message_indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0), required=False, max_length=1000
    )
    occurred_at = serializers.DateTimeField(required=False, allow_null=True)
    entities = EntityInputSerializer(many=True, required=False, max_length=50)
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


def _scope_objects(user, data: dict) -> tuple:
    character = chat = None
    if data.get("character"):
        character = chat_selectors.character_get(user=user, character_id=data["character"])
    if data.get("chat"):
        chat = chat_selectors.chat_get(user=user, chat_id=data["chat"])
    return character, chat


def _int_param(request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    ids = parse_ids([value], name)
    if len(ids) != 1:
        raise ApplicationError(f"Give one id in `{name}`.", {"field": name})
    return ids[0]


def _kinds_param(values: list[str]) -> list[str]:
    kinds = [k.strip() for value in values for k in value.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in Kind.values]
    if unknown:
        raise ApplicationError("Unknown memory kind(s).", {"field": "kind", "kinds": unknown})
    return kinds


class MemoryListApi(APIView):
    @extend_schema(
        operation_id="memories_list",
        parameters=[
            OpenApiParameter("character", int, description="A character's memories, and those of its chats."),
            OpenApiParameter("chat", int, description="A chat's memories and its characters' persistent ones."),
            OpenApiParameter("kind", str, description="Comma-separated kinds (repeatable)."),
            OpenApiParameter("status", str, enum=Status.values),
            OpenApiParameter("entity", int, description="Only memories linked to this entity."),
        ],
        responses=MemoryOutputSerializer(many=True),
    )
    def get(self, request):
        status_value = request.query_params.get("status") or None
        if status_value and status_value not in Status.values:
            raise ApplicationError("Unknown status.", {"field": "status", "allowed": Status.values})
        qs = selectors.memory_list(
            user=request.user,
            character_id=_int_param(request, "character"),
            chat_id=_int_param(request, "chat"),
            kinds=_kinds_param(request.query_params.getlist("kind")),
            status=status_value,
            entity_id=_int_param(request, "entity"),
        )
        paginator = MemoryPagination()
        page = paginator.paginate_queryset(_with_links(qs), request, view=self)
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
        character, chat = _scope_objects(request.user, data)
        data.pop("character", None)
        data.pop("chat", None)
        candidate = Candidate(source_instance=request.META.get(INSTANCE_HEADER, "")[:100], **data)
        [result] = memories_submit(
            user=request.user, candidates=[candidate], character=character, chat=chat, interactive=True
        )
        shown = _with_links(Memory.objects.filter(pk=(result.memory or result.related).pk)).get()
        body = {**MemoryOutputSerializer(shown).data, "decision": DecisionOutputSerializer(result.decision).data}
        return Response(body, status=status.HTTP_200_OK if result.memory is None else status.HTTP_201_CREATED)


class MemoryDetailApi(APIView):
    @extend_schema(operation_id="memories_retrieve", responses=MemoryOutputSerializer)
    def get(self, request, memory_id: int):
        memory = selectors.memory_get(user=request.user, memory_id=memory_id)
        return Response(MemoryOutputSerializer(_with_links(Memory.objects.filter(pk=memory.pk)).get()).data)

    @extend_schema(
        operation_id="memories_update", request=MemoryUpdateInputSerializer, responses=MemoryOutputSerializer
    )
    @idempotent
    def patch(self, request, memory_id: int):
        memory = selectors.memory_get(user=request.user, memory_id=memory_id)
        serializer = MemoryUpdateInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        entities = data.pop("entities", None)
        memory = memory_update(memory=memory, data=data, entities=entities)
        return Response(MemoryOutputSerializer(_with_links(Memory.objects.filter(pk=memory.pk)).get()).data)

    @extend_schema(
        operation_id="memories_destroy",
        description="Retires the memory: it leaves search and injection but keeps its place in history.",
        responses=MemoryOutputSerializer,
    )
    @idempotent
    def delete(self, request, memory_id: int):
        memory = memory_retire(memory=selectors.memory_get(user=request.user, memory_id=memory_id))
        return Response(MemoryOutputSerializer(_with_links(Memory.objects.filter(pk=memory.pk)).get()).data)


class MemoryHistoryApi(APIView):
    @extend_schema(
        operation_id="memories_history",
        description="The supersession chain through this memory, oldest first.",
        responses=MemoryOutputSerializer(many=True),
    )
    def get(self, request, memory_id: int):
        memory = selectors.memory_get(user=request.user, memory_id=memory_id)
        chain = selectors.memory_history(memory=memory)
        by_pk = _with_links(Memory.objects.filter(pk__in=[m.pk for m in chain])).in_bulk()
        return Response({"results": MemoryOutputSerializer([by_pk[m.pk] for m in chain], many=True).data})


class MemorySearchInputSerializer(StorableInputSerializer):
    query = serializers.CharField(max_length=10_000)
    character = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    chat = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    kinds = serializers.ListField(child=serializers.ChoiceField(choices=Kind.values), required=False, max_length=30)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT, default=10)
    min_score = serializers.FloatField(required=False, allow_null=True, min_value=0, max_value=2)
    include_retired = serializers.BooleanField(required=False, default=False)
    instance = serializers.CharField(required=False, allow_blank=True, max_length=100)

    class Meta:
        ref_name = "MemorySearchInput"


class SearchSignalsSerializer(serializers.Serializer):
    vector = serializers.FloatField(allow_null=True, help_text="Best cosine similarity over the query sentences.")
    text = serializers.FloatField(allow_null=True, help_text="IDF-weighted full-text score.")
    recency = serializers.FloatField()
    graph = serializers.FloatField()
    instance = serializers.FloatField()


class SearchResultSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="memory.pk")
    kind = serializers.CharField(source="memory.kind")
    content = serializers.CharField(
        source="excerpt", help_text="Whole when under 2,000 characters, else the best part."
    )
    score = serializers.FloatField()
    relevance = serializers.FloatField()
    signals = SearchSignalsSerializer()
    status = serializers.CharField(source="memory.status")
    character = serializers.IntegerField(source="memory.character_id", allow_null=True)
    chat = serializers.IntegerField(source="memory.chat_id", allow_null=True)
    source_chat = serializers.IntegerField(source="memory.source_chat_id", allow_null=True)
    source_message_indices = serializers.ListField(
        child=serializers.IntegerField(), source="memory.source_message_indices"
    )
    importance = serializers.IntegerField(source="memory.importance")
    confidence = serializers.FloatField(source="memory.confidence")
    occurred_at = serializers.DateTimeField(source="memory.occurred_at", allow_null=True)
    created_at = serializers.DateTimeField(source="memory.created_at")


class SearchOutputSerializer(serializers.Serializer):
    method = serializers.ChoiceField(choices=["hybrid", "vector", "text"])
    results = SearchResultSerializer(many=True)
    timings_ms = serializers.DictField(child=serializers.FloatField())


class MemorySearchApi(APIView):
    @extend_schema(
        operation_id="memories_search",
        request=MemorySearchInputSerializer,
        responses=SearchOutputSerializer,
        description="Hybrid search (per-sentence KNN + full text, fused, then entity-core's multi-signal score). "
        "`method` tells which ran: `text` when no embedding was possible. The asking instance may be given as "
        "`instance` or the X-Lorekeeper-Instance header.",
    )
    def post(self, request):
        serializer = MemorySearchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        outcome = memory_search(
            user=request.user,
            query=data["query"],
            character_id=data.get("character"),
            chat_id=data.get("chat"),
            kinds=data.get("kinds") or None,
            limit=data["limit"],
            min_score=data.get("min_score"),
            include_retired=data["include_retired"],
            instance=data.get("instance") or request.META.get(INSTANCE_HEADER, "")[:100],
        )
        return Response(SearchOutputSerializer(outcome).data)


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
        qs = entity.memories.filter(status=Status.ACTIVE).defer("embedding").order_by("-id")[:100]
        return MemoryOutputSerializer(_with_links(qs), many=True).data


class EntityListApi(APIView):
    @extend_schema(
        operation_id="entities_list",
        parameters=[
            OpenApiParameter("character", int, description="That character's registry and the user-wide one."),
            OpenApiParameter("search", str),
        ],
        responses=EntityOutputSerializer(many=True),
    )
    def get(self, request):
        qs = selectors.entity_list(
            user=request.user,
            character_id=_int_param(request, "character"),
            search=request.query_params.get("search", ""),
        )
        paginator = MemoryPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(EntityOutputSerializer(page, many=True).data)


class EntityUpdateInputSerializer(EntityInputSerializer):
    class Meta:
        ref_name = "EntityUpdateInput"


class EntityDetailApi(APIView):
    @extend_schema(operation_id="entities_retrieve", responses=EntityDetailOutputSerializer)
    def get(self, request, entity_id: int):
        entity = selectors.entity_get(user=request.user, entity_id=entity_id)
        return Response(EntityDetailOutputSerializer(entity).data)

    @extend_schema(
        operation_id="entities_update", request=EntityUpdateInputSerializer, responses=EntityDetailOutputSerializer
    )
    @idempotent
    def patch(self, request, entity_id: int):
        entity = selectors.entity_get(user=request.user, entity_id=entity_id)
        serializer = EntityUpdateInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        entity = entity_update(entity=entity, data=serializer.validated_data)
        return Response(EntityDetailOutputSerializer(entity).data)


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
