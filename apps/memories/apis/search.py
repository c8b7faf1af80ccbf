"""Memory search over the API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.serializers import StorableInputSerializer
from apps.memories.apis.memories import INSTANCE_HEADER
from apps.memories.models import Kind
from apps.memories.search import MAX_LIMIT, SearchHit, SearchOutcome, memory_search


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
    text = serializers.FloatField(allow_null=True, help_text="The share of the query's word weight it holds.")
    recency = serializers.FloatField()
    graph = serializers.FloatField()
    instance = serializers.FloatField()
    speaker = serializers.FloatField(help_text="1 for a chat turn spoken by someone the query names.")
    time = serializers.FloatField(help_text="1 for a memory whose time in the story falls in a date the query names.")


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


# What the answer reads of each hit's memory (SearchResultSerializer's `memory.…` sources, a foreign key by its
# field's name): only these are loaded, not its structured data, hashes and the rest.
HIT_FIELDS = tuple(
    dict.fromkeys(
        field.source.removeprefix("memory.").removesuffix("_id")
        for field in SearchResultSerializer().fields.values()
        if field.source.startswith("memory.") and field.source != "memory.pk"
    )
)


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
            fields=HIT_FIELDS,
        )
        return Response(search_answer(outcome))


_WHEN = serializers.DateTimeField()
_SIGNALS = tuple(SearchSignalsSerializer().fields)


def search_answer(outcome: SearchOutcome) -> dict:
    """SearchOutputSerializer's representation of `outcome`, made directly: the serializers copied their fields
    anew for every search, half a millisecond of a search's time. (tests/memories/test_apis.py compares the two.)"""
    return {"method": outcome.method, "results": [_result(hit) for hit in outcome.results],
            "timings_ms": {step: float(ms) for step, ms in outcome.timings_ms.items()}}  # fmt: skip


def _result(hit: SearchHit) -> dict:
    memory = hit.memory
    signals = {name: (None if hit.signals[name] is None else float(hit.signals[name])) for name in _SIGNALS}
    return {
        "id": memory.pk,
        "kind": memory.kind,
        "content": hit.excerpt,
        "score": float(hit.score),
        "relevance": float(hit.relevance),
        "signals": signals,
        "status": memory.status,
        "character": memory.character_id,
        "chat": memory.chat_id,
        "source_chat": memory.source_chat_id,
        "source_message_indices": [int(index) for index in memory.source_message_indices],
        "importance": int(memory.importance),
        "confidence": float(memory.confidence),
        "occurred_at": None if memory.occurred_at is None else _WHEN.to_representation(memory.occurred_at),
        "created_at": _WHEN.to_representation(memory.created_at),
    }
