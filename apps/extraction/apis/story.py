"""What the pipeline found out about a chat's story, over the API: scenes with their recap versions, continuity
checks, and the away recap ("Previously on…")."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.common.idempotency import idempotent
from apps.common.serializers import StorableInputSerializer
from apps.extraction import selectors
from apps.extraction.apis.pipeline import ContinuityOutputSerializer, JobOutputSerializer
from apps.extraction.models import Recap, Scene
from apps.extraction.services.pipeline import chat_opened, recap_dismiss
from apps.extraction.services.scenes import scene_recap_again, scene_update

MAX_LISTED = 500


class RecapVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    content = serializers.CharField()
    created_at = serializers.CharField()
    llm_call = serializers.IntegerField(allow_null=True)

    class Meta:
        ref_name = "SceneRecapVersion"


class SceneOutputSerializer(serializers.ModelSerializer):
    recap = serializers.CharField(help_text="The current version's text.")
    recap_versions = RecapVersionSerializer(many=True)
    source_memory_ids = serializers.ListField(child=serializers.IntegerField())

    class Meta:
        model = Scene
        ref_name = "Scene"
        fields = [
            "id",
            "start_index",
            "end_index",
            "name",
            "cue",
            "model_confirmed",
            "recap",
            "recap_versions",
            "current_version",
            "recap_memory",
            "source_memory_ids",
            "epistemic_done",
            "created_at",
        ]


class SceneListApi(APIView):
    @extend_schema(
        operation_id="scenes_list",
        responses=SceneOutputSerializer(many=True),
        description="The chat's closed scenes, oldest first: messages [start_index, end_index), why the break was "
        "found, the recap versions and the memories extracted from the scene.",
    )
    def get(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        scenes = selectors.scene_list(user=request.user, chat=chat)[:MAX_LISTED]
        return Response({"results": SceneOutputSerializer(scenes, many=True).data})


class SceneUpdateInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    current_version = serializers.IntegerField(min_value=0, required=False)

    class Meta:
        ref_name = "SceneUpdateInput"


class SceneDetailApi(APIView):
    @extend_schema(operation_id="scenes_retrieve", responses=SceneOutputSerializer)
    def get(self, request, chat_id: int, scene_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        return Response(
            SceneOutputSerializer(selectors.scene_get(user=request.user, chat=chat, scene_id=scene_id)).data
        )

    @extend_schema(
        operation_id="scenes_update",
        request=SceneUpdateInputSerializer,
        responses=SceneOutputSerializer,
        description="Rename the scene, or make another recap version the current one.",
    )
    @idempotent
    def patch(self, request, chat_id: int, scene_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        scene = selectors.scene_get(user=request.user, chat=chat, scene_id=scene_id)
        serializer = SceneUpdateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(SceneOutputSerializer(scene_update(scene=scene, **serializer.validated_data)).data)


class SceneRecapApi(APIView):
    @extend_schema(
        operation_id="scenes_recap_again",
        request=None,
        responses={202: JobOutputSerializer},
        description="Ask the model for a new version of the scene's recap (earlier versions are kept).",
    )
    @idempotent
    def post(self, request, chat_id: int, scene_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        job = scene_recap_again(scene=selectors.scene_get(user=request.user, chat=chat, scene_id=scene_id))
        job = selectors.job_get(user=request.user, job_id=job.pk)
        return Response(JobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ContinuityListApi(APIView):
    @extend_schema(
        operation_id="continuity_list",
        responses=ContinuityOutputSerializer(many=True),
        description="Continuity checks of the chat's replies, newest first (at most 100).",
    )
    def get(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        checks = selectors.continuity_list(user=request.user, chat=chat)[:100]
        return Response({"results": ContinuityOutputSerializer(checks, many=True).data})


class RecapOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Recap
        ref_name = "AwayRecap"
        fields = ["id", "state", "text", "error", "away_since", "created_at", "ready_at", "dismissed_at"]


class RecapEnvelopeSerializer(serializers.Serializer):
    recap = RecapOutputSerializer(allow_null=True)

    class Meta:
        ref_name = "AwayRecapEnvelope"


class RecapApi(APIView):
    @extend_schema(
        operation_id="recap_retrieve",
        responses=RecapEnvelopeSerializer,
        description="The recap to show for this chat, if any (pending, ready or failed); reading it changes nothing.",
    )
    def get(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        recap = selectors.recap_current(user=request.user, chat=chat)
        return Response({"recap": RecapOutputSerializer(recap).data if recap else None})

    @extend_schema(
        operation_id="recap_return",
        request=None,
        responses={200: RecapEnvelopeSerializer, 202: RecapEnvelopeSerializer},
        description="Say the person is back at this chat. After more than `recap_after_hours` away a “Previously "
        "on…” is started in the background (202, state pending: poll GET until ready); otherwise the current "
        "recap, if any (possibly still being written), is answered (200).",
    )
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        recap, started = chat_opened(user=request.user, chat=chat)
        return Response(
            {"recap": RecapOutputSerializer(recap).data if recap else None},
            status=status.HTTP_202_ACCEPTED if started else status.HTTP_200_OK,
        )


class RecapDismissApi(APIView):
    @extend_schema(operation_id="recap_dismiss", request=None, responses=RecapOutputSerializer)
    @idempotent
    def post(self, request, chat_id: int, recap_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        recap = recap_dismiss(recap=selectors.recap_get(user=request.user, chat=chat, recap_id=recap_id))
        return Response(RecapOutputSerializer(recap).data)
