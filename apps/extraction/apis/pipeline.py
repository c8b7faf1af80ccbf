"""A chat's extraction pipeline over the API: where each tier stands, the jobs (with progress and errors), and a
person's controls: pause, resume, rebuild from a message, run a tier now, retry a failed job."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import paginated
from apps.extraction import selectors
from apps.extraction.models import ContinuityCheck, PipelineJob
from apps.extraction.services.consent import pipeline_run
from apps.extraction.services.jobs import RETRYABLE, job_retry
from apps.extraction.services.pipeline import (
    BY_HAND,
    pipeline_pause,
    pipeline_rebuild,
    pipeline_request,
    pipeline_resume,
)


class JobOutputSerializer(serializers.ModelSerializer):
    chat = serializers.PrimaryKeyRelatedField(read_only=True)
    tier_display = serializers.CharField(source="get_tier_display")
    llm_calls = serializers.ListField(child=serializers.IntegerField())

    class Meta:
        model = PipelineJob
        ref_name = "PipelineJob"
        fields = [
            "id",
            "chat",
            "tier",
            "tier_display",
            "state",
            "manual",
            "params",
            "attempts",
            "next_attempt_at",
            "progress",
            "error",
            "result",
            "read_from",
            "read_to",
            "llm_calls",
            "created_at",
            "started_at",
            "finished_at",
        ]


class ContinuityOutputSerializer(serializers.ModelSerializer):
    findings = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = ContinuityCheck
        ref_name = "ContinuityCheck"
        fields = [
            "id",
            "message_index",
            "status",
            "findings",
            "repair_note",
            "repair_consumed_at",
            "llm_call",
            "created_at",
        ]


class CoverageSerializer(serializers.Serializer):
    tier = serializers.CharField()
    label = serializers.CharField()
    through = serializers.IntegerField(help_text="The first message index this tier has not covered.")
    next_at = serializers.IntegerField(
        allow_null=True, help_text="The message count this tier reads on at, while it waits for more messages."
    )
    note = serializers.CharField(help_text="Why the tier is behind with nothing queued, in words; empty when not.")

    class Meta:
        ref_name = "PipelineCoverage"


class EstimateSerializer(serializers.Serializer):
    messages = serializers.IntegerField(help_text="Messages memories are not yet extracted from.")
    calls = serializers.IntegerField(help_text="Model calls, about.")
    prompt_tokens = serializers.IntegerField()
    reply_tokens = serializers.IntegerField()
    seconds = serializers.FloatField(
        allow_null=True, help_text="At the connection's measured speed; null until it answered background work."
    )
    cost = serializers.DecimalField(
        max_digits=14, decimal_places=4, allow_null=True, help_text="From the connection's prices; null without."
    )

    class Meta:
        ref_name = "PipelineEstimate"


class PipelineOutputSerializer(serializers.Serializer):
    chat = serializers.IntegerField(source="chat.pk")
    state = serializers.ChoiceField(
        choices=selectors.PIPELINE_STATES,
        help_text="gathering: nothing to do until more messages come (each coverage row's `next_at` and `note` "
        "say when); idle: every tier has read every message; off: extraction is switched off in your settings; "
        "no_model: no connection is ticked for "
        "background work; awaiting_consent: the chat's history waits for Run (see `estimate`); limit_reached: the "
        "account's daily token limit paused background work until midnight.",
    )
    estimate = EstimateSerializer(allow_null=True, help_text="What Run will spend, while the state is "
                                  "awaiting_consent.")  # fmt: skip
    automatic = serializers.BooleanField(
        source="pipeline.auto_extract", help_text="Extract this chat's history without asking."
    )
    tokens_today = serializers.IntegerField(help_text="Background tokens the account spent today.")
    daily_limit = serializers.IntegerField(allow_null=True, help_text="The account's daily token limit.")
    paused = serializers.BooleanField(source="pipeline.paused")
    message_count = serializers.IntegerField()
    summary_end = serializers.IntegerField(help_text="The rolling summary covers messages before this index.")
    coverage = CoverageSerializer(many=True)
    stale_from = serializers.IntegerField(
        source="pipeline.stale_from",
        allow_null=True,
        help_text="Messages from here changed after extraction covered them; rebuild from here to redo them.",
    )
    pending = serializers.IntegerField(help_text="Jobs queued or running.")
    failed = JobOutputSerializer(many=True, help_text="Tiers stopped by a failure: retry them.")
    jobs = JobOutputSerializer(many=True, help_text="The latest jobs.")
    continuity = ContinuityOutputSerializer(allow_null=True, help_text="The latest continuity check.")
    profiles_built_at = serializers.DateTimeField(source="pipeline.profiles_built_at", allow_null=True)
    last_active_at = serializers.DateTimeField(source="pipeline.last_active_at", allow_null=True)

    class Meta:
        ref_name = "Pipeline"


def _status(request, chat) -> Response:
    return Response(PipelineOutputSerializer(selectors.pipeline_status(user=request.user, chat=chat)).data)


class PipelineDetailApi(APIView):
    @extend_schema(operation_id="pipeline_retrieve", responses=PipelineOutputSerializer)
    def get(self, request, chat_id: int):
        return _status(request, chat_selectors.chat_get(user=request.user, chat_id=chat_id))


class PipelinePauseApi(APIView):
    @extend_schema(
        operation_id="pipeline_pause",
        request=None,
        responses=PipelineOutputSerializer,
        description="Stop automatic extraction for the chat after the job now running; what you ask for by hand "
        "still runs.",
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        pipeline_pause(chat=chat)
        return _status(request, chat)


class PipelineResumeApi(APIView):
    @extend_schema(operation_id="pipeline_resume", request=None, responses=PipelineOutputSerializer)
    @idempotent
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        pipeline_resume(chat=chat)
        return _status(request, chat)


class RebuildInputSerializer(serializers.Serializer):
    from_index = serializers.IntegerField(min_value=0)

    class Meta:
        ref_name = "PipelineRebuildInput"


class PipelineRebuildApi(APIView):
    @extend_schema(
        operation_id="pipeline_rebuild",
        request=RebuildInputSerializer,
        responses={202: JobOutputSerializer},
        description="Take back what extraction made from message `from_index` on (it is retired, what it replaced "
        "comes back), and extract those messages again. For a big edit far back in a chat.",
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = RebuildInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = pipeline_rebuild(chat=chat, from_index=serializer.validated_data["from_index"])
        job = selectors.job_get(user=request.user, job_id=job.pk)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class RunInputSerializer(serializers.Serializer):
    tier = serializers.ChoiceField(
        choices=list(BY_HAND), required=False, help_text="A tier to run now; without it, extract the chat's history."
    )
    index = serializers.IntegerField(min_value=0, required=False, help_text="continuity: the reply to check.")
    automatic = serializers.BooleanField(
        required=False, help_text="Without `tier`: also extract what arrives later without asking (or stop)."
    )

    def validate(self, data):
        if "tier" in data and "automatic" in data:
            raise serializers.ValidationError({"automatic": "Goes without `tier`."})
        return data

    class Meta:
        ref_name = "PipelineRunInput"


class PipelineRunApi(APIView):
    @extend_schema(
        operation_id="pipeline_run",
        request=RunInputSerializer,
        responses={202: JobOutputSerializer, 200: PipelineOutputSerializer},
        description="Without `tier`: extract the chat's history (what `estimate` in the pipeline's status said), "
        "and with `automatic` say whether later backlogs wait for you; answers the pipeline's status. With "
        "`tier`: run it now: canon (rewrite it from resolved arcs and important memories), continuity (check the "
        "latest reply, or `index`), profiles, or compaction; answers the job.",
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = RunInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "tier" not in data:
            pipeline_run(chat=chat, automatic=data.get("automatic"))
            return _status(request, chat)
        job = pipeline_request(chat=chat, **data)
        job = selectors.job_get(user=request.user, job_id=job.pk)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class PipelineJobListApi(APIView):
    @extend_schema(
        operation_id="pipeline_jobs_list",
        parameters=[OpenApiParameter("state", str, enum=PipelineJob.State.values)],
        responses=paginated(JobOutputSerializer),
    )
    def get(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        state = request.query_params.get("state") or None
        if state and state not in PipelineJob.State.values:
            raise ApplicationError("Unknown state.", {"field": "state", "allowed": PipelineJob.State.values})
        paginator = ListPagination()
        page = paginator.paginate_queryset(
            selectors.job_list(user=request.user, chat=chat, state=state), request, view=self
        )
        return paginator.get_paginated_response(JobOutputSerializer(page, many=True).data)


class PipelineJobDetailApi(APIView):
    @extend_schema(operation_id="pipeline_jobs_retrieve", responses=JobOutputSerializer)
    def get(self, request, job_id: int):
        return Response(JobOutputSerializer(selectors.job_get(user=request.user, job_id=job_id)).data)


class PipelineJobRetryApi(APIView):
    @extend_schema(
        operation_id="pipeline_jobs_retry",
        request=None,
        responses={202: JobOutputSerializer, 200: JobOutputSerializer},
        description="Queue a failed, discarded or cancelled job again, with fresh attempts (202). A job queued, "
        "running or done is answered as it is (200).",
    )
    @idempotent
    def post(self, request, job_id: int):
        job = selectors.job_get(user=request.user, job_id=job_id)
        queued = job.state in RETRYABLE
        job = job_retry(job=job)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED if queued else 200)
