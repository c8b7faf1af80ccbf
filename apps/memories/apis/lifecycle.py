"""The memory lifecycle over the API: classified submission in batches (an extraction pass), the decisions behind
a memory, lifecycle settings, manual consolidation and hierarchy runs, and their jobs."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.ids import id_from
from apps.common.pagination import ListPagination
from apps.common.serializers import paginated
from apps.memories import selectors
from apps.memories.apis.memories import (
    INSTANCE_HEADER,
    DecisionOutputSerializer,
    MemoryCreateInputSerializer,
    SubmittedMemorySerializer,
    submitted_output,
)
from apps.memories.models import LifecycleJob
from apps.memories.services.lifecycle.classify import Candidate, memories_submit
from apps.memories.services.lifecycle.counters import consolidation_enqueue
from apps.memories.services.lifecycle.decay import memories_pass_end
from apps.memories.services.lifecycle.jobs import hierarchy_enqueue
from apps.memories.services.lifecycle.periods import LEVELS
from apps.memories.services.lifecycle.scope import DEDUP_KINDS, LONG_TERM_KINDS, SESSION_KINDS, ScopeKey
from apps.memories.services.settings import lifecycle_settings_get, lifecycle_settings_set

MAX_BATCH = 200


def _scope(user, data: dict):
    character = chat = None
    if data.get("chat"):
        chat = chat_selectors.chat_get(user=user, chat_id=data["chat"])
    elif data.get("character"):
        character = chat_selectors.character_get(user=user, character_id=data["character"])
    else:
        raise ApplicationError("Give `character` or `chat`.", {"field": "character"})
    return character, chat


class CandidateSerializer(MemoryCreateInputSerializer):
    class Meta:
        ref_name = "MemoryCandidate"

    def get_fields(self):
        fields = super().get_fields()
        fields.pop("character")
        fields.pop("chat")
        return fields


class SubmitInputSerializer(serializers.Serializer):
    character = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    chat = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    candidates = CandidateSerializer(many=True, min_length=1, max_length=MAX_BATCH)
    extraction_pass = serializers.BooleanField(
        default=False,
        help_text="Count this batch as one extraction pass: memories of the pass's tiers (long-term, session) "
        "that it did not find again come one step nearer to decaying.",
    )

    class Meta:
        ref_name = "MemorySubmitInput"


class SubmitOutputSerializer(serializers.Serializer):
    results = SubmittedMemorySerializer(many=True)
    decay = serializers.DictField(required=False, help_text="unconfirmed / retired counts of the pass.")

    class Meta:
        ref_name = "MemorySubmitOutput"


def _pass_kinds(candidates: list[Candidate]) -> list[str]:
    kinds = {c.kind for c in candidates}
    tiers = [tier for tier in (LONG_TERM_KINDS, SESSION_KINDS) if kinds & set(tier)]
    return sorted({k for tier in tiers for k in tier} | (kinds & set(DEDUP_KINDS)))


class MemorySubmitApi(APIView):
    @extend_schema(
        operation_id="memories_submit",
        request=SubmitInputSerializer,
        responses=SubmitOutputSerializer,
        description="Classify candidates of one scope in order: each is passed (new), superseded (replacing an "
        "older one), uncertain (kept beside a similar one), a contradiction (kept, linked) or rejected (a "
        "duplicate: the existing memory is re-confirmed). Every decision is recorded with its scores.",
    )
    @idempotent
    def post(self, request):
        serializer = SubmitInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        character, chat = _scope(request.user, data)
        instance = request.META.get(INSTANCE_HEADER, "")[:100]
        candidates = [Candidate(source_instance=instance, origin="api", **item) for item in data["candidates"]]
        results = memories_submit(
            user=request.user, candidates=candidates, character=character, chat=chat, interactive=True
        )
        body = {"results": [submitted_output(r, user=request.user) for r in results]}
        if data["extraction_pass"]:
            seen = [(r.memory or r.related).pk for r in results if (r.memory or r.related)]
            scope = ScopeKey(request.user.pk, None if chat else character.pk, chat.pk if chat else None)
            body["decay"] = memories_pass_end(scope=scope, kinds=_pass_kinds(candidates), seen_ids=seen)
        return Response(body)


class MemoryDecisionsApi(APIView):
    @extend_schema(
        operation_id="memories_decisions",
        description="Why this memory is here, or why it was retired: every lifecycle decision that made or changed "
        "it or compared a candidate with it, newest first.",
        responses=DecisionOutputSerializer(many=True),
    )
    def get(self, request, memory_id: int):
        decisions = selectors.decision_list(user=request.user, memory_id=memory_id)[:500]
        return Response({"results": DecisionOutputSerializer(decisions, many=True).data})


class LifecycleSettingsSerializer(serializers.Serializer):
    time_zone = serializers.CharField(max_length=64, required=False, help_text="IANA name, e.g. Europe/Paris.")
    hierarchy_enabled = serializers.BooleanField(required=False)

    class Meta:
        ref_name = "LifecycleSettings"


class LifecycleSettingsApi(APIView):
    @extend_schema(operation_id="lifecycle_settings_retrieve", responses=LifecycleSettingsSerializer)
    def get(self, request):
        return Response(LifecycleSettingsSerializer(lifecycle_settings_get(user=request.user)).data)

    @extend_schema(
        operation_id="lifecycle_settings_update",
        request=LifecycleSettingsSerializer,
        responses=LifecycleSettingsSerializer,
    )
    @idempotent
    def put(self, request):
        serializer = LifecycleSettingsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        own = lifecycle_settings_set(user=request.user, **serializer.validated_data)
        return Response(LifecycleSettingsSerializer(own).data)


class JobOutputSerializer(serializers.ModelSerializer):
    character = serializers.PrimaryKeyRelatedField(read_only=True)
    chat = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = LifecycleJob
        ref_name = "LifecycleJob"
        fields = [
            "id",
            "type",
            "character",
            "chat",
            "params",
            "state",
            "progress",
            "result",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]


class HierarchyInputSerializer(serializers.Serializer):
    character = serializers.IntegerField(min_value=1)
    granularity = serializers.ChoiceField(choices=LEVELS, required=False, allow_blank=True, default="")
    period = serializers.CharField(required=False, allow_blank=True, default="", max_length=20)

    class Meta:
        ref_name = "HierarchyRunInput"


class HierarchyRunApi(APIView):
    @extend_schema(
        operation_id="memories_hierarchy_run",
        request=HierarchyInputSerializer,
        responses={202: JobOutputSerializer},
        description="Build a character's due daily/weekly/monthly/yearly summaries now (what the 05:00 schedule "
        "would do). With `granularity` and `period` (2026-11-21, 2026-W47, 2026-11, 2026) that period is rebuilt "
        "even if not yet due, superseding its previous summary.",
    )
    @idempotent
    def post(self, request):
        serializer = HierarchyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        character = chat_selectors.character_get(user=request.user, character_id=data["character"])
        job = hierarchy_enqueue(
            user=request.user,
            character=character,
            granularity=data["granularity"],
            period=data["period"],
            manual=True,
        )
        job = selectors.lifecycle_job_get(user=request.user, job_id=job.pk)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ConsolidateInputSerializer(serializers.Serializer):
    character = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    chat = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    kind = serializers.ChoiceField(choices=list(DEDUP_KINDS))

    class Meta:
        ref_name = "ConsolidateInput"


class ConsolidationRunApi(APIView):
    @extend_schema(
        operation_id="memories_consolidate",
        request=ConsolidateInputSerializer,
        responses={202: JobOutputSerializer},
        description="Ask the model now to merge near-duplicate memories of one kind in a scope (otherwise done when "
        "the kind's counter reaches its threshold).",
    )
    @idempotent
    def post(self, request):
        serializer = ConsolidateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        character, chat = _scope(request.user, data)
        scope = ScopeKey(request.user.pk, None if chat else character.pk, chat.pk if chat else None)
        job = consolidation_enqueue(scope=scope, kind=data["kind"], manual=True)
        job = selectors.lifecycle_job_get(user=request.user, job_id=job.pk)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class LifecycleJobListApi(APIView):
    @extend_schema(
        operation_id="lifecycle_jobs_list",
        parameters=[OpenApiParameter("character", int)],
        responses=paginated(JobOutputSerializer),
    )
    def get(self, request):
        raw = request.query_params.get("character")
        character_id = id_from(raw) if raw else None
        if raw and character_id is None:
            raise ApplicationError("character must be an id.", {"field": "character"})
        paginator = ListPagination()
        page = paginator.paginate_queryset(
            selectors.lifecycle_job_list(user=request.user, character_id=character_id), request, view=self
        )
        return paginator.get_paginated_response(JobOutputSerializer(page, many=True).data)


class LifecycleJobDetailApi(APIView):
    @extend_schema(operation_id="lifecycle_jobs_retrieve", responses=JobOutputSerializer)
    def get(self, request, job_id: int):
        return Response(JobOutputSerializer(selectors.lifecycle_job_get(user=request.user, job_id=job_id)).data)
