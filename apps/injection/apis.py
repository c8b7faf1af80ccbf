"""The context builder and persistent recall over the API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.services import settings_document_get
from apps.chats import selectors as chat_selectors
from apps.chats.apis.common import MIRROR, mirrors_file
from apps.common.idempotency import idempotent
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH_REQUIRED, request_integrity, with_etag
from apps.common.serializers import StorableInputSerializer
from apps.injection.selectors import injection_state_get
from apps.injection.services.context import context_build
from apps.injection.services.recall import recall_edit, recall_rerun, recall_store, recall_stored
from apps.injection.services.settings import SLOT, injection_settings_get


class ContextInputSerializer(StorableInputSerializer):
    message = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100_000,
        help_text="The pending user message. Leave it out for a regeneration: the stored recall of the turn is used.",
    )
    character = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="The responding character (group chats)."
    )
    preview = serializers.BooleanField(
        default=False, help_text="Build without writing anything (no recall kept, no repair note used up)."
    )

    class Meta:
        ref_name = "ContextInput"


class SlotSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    text = serializers.CharField(help_text="To inject as an extension prompt ('' when off or given by a macro).")
    content = serializers.CharField(help_text="What the slot holds, however it is delivered.")
    tokens = serializers.IntegerField()
    position = serializers.ChoiceField(choices=["in_prompt", "in_chat"])
    depth = serializers.IntegerField()
    role = serializers.CharField()
    enabled = serializers.BooleanField()
    delivery = serializers.ChoiceField(choices=["prompt", "macro", "off"])
    memory_ids = serializers.ListField(child=serializers.IntegerField())

    class Meta:
        ref_name = "ContextSlot"


class ExtensionPromptSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.CharField()
    position = serializers.IntegerField(help_text="SillyTavern's extension_prompt_types: 0 in prompt, 1 in chat.")
    depth = serializers.IntegerField()
    scan = serializers.BooleanField()
    role = serializers.IntegerField(help_text="SillyTavern's extension_prompt_roles: 0 system.")

    class Meta:
        ref_name = "SillyTavernExtensionPrompt"


class TierStatsSerializer(serializers.Serializer):
    budget = serializers.IntegerField()
    injected = serializers.IntegerField()
    full = serializers.IntegerField()

    class Meta:
        ref_name = "TierTrimStats"


class ContextOutputSerializer(serializers.Serializer):
    chat = serializers.IntegerField(source="chat.pk")
    integrity = serializers.UUIDField(source="chat.integrity", help_text="The chat's, after the recall was kept.")
    character = serializers.CharField(source="responder.name", allow_null=True, default=None)
    turn = serializers.CharField(help_text="dialogue, action, transition or intimate.")
    turn_scores = serializers.DictField(child=serializers.IntegerField())
    unified = serializers.BooleanField(source="settings.unified")
    slots = serializers.DictField(child=SlotSerializer(), help_text="The 13 named slots by extension prompt key.")
    macros = serializers.DictField(child=serializers.CharField(allow_blank=True))
    sillytavern = ExtensionPromptSerializer(many=True, help_text="setExtensionPrompt arguments, all 13 keys.")
    budgets = serializers.DictField(source="stats", child=TierStatsSerializer())
    injected_tokens = serializers.IntegerField()
    recall = serializers.DictField(help_text="source new|stored|none, message_index, stored, memories, bme_recall.")
    timings_ms = serializers.DictField(child=serializers.FloatField())
    preview = serializers.BooleanField()

    class Meta:
        ref_name = "Context"


class LastContextSerializer(serializers.Serializer):
    built_at = serializers.DateTimeField(allow_null=True, help_text="Null: no context built yet.")
    slots = serializers.DictField(help_text="By extension prompt key: text, tokens, memory_ids.")
    macros = serializers.DictField(child=serializers.CharField(allow_blank=True))
    stats = serializers.DictField(child=TierStatsSerializer(), help_text="Trim statistics by tier.")
    turn = serializers.CharField(allow_blank=True)
    builds = serializers.IntegerField()

    class Meta:
        ref_name = "LastContext"


class ContextApi(APIView):
    @extend_schema(
        operation_id="context_build",
        parameters=[MIRROR],
        request=ContextInputSerializer,
        responses=ContextOutputSerializer,
        description="What to inject before the next generation: the 13 slots with position, depth and role, the "
        "11 macros resolved, and SillyTavern's extension prompts. The recall made for the pending message is kept "
        "on the chat's last user message when that is the message (the answer's `integrity` is the chat's new "
        "one); without a message, that turn's kept recall is used.",
    )
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = ContextInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        context = context_build(
            user=request.user,
            chat=chat,
            message=data.get("message"),
            character=data.get("character") or None,
            preview=data["preview"],
            mirror=mirrors_file(request),
        )
        return with_etag(Response(ContextOutputSerializer(context).data), context.chat.integrity)

    @extend_schema(
        operation_id="context_last",
        responses=LastContextSerializer,
        description="The last context built for the chat (the content cache macros read): slots, macros, trim "
        "statistics, turn type, when.",
    )
    def get(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        state = injection_state_get(user=request.user, chat=chat)
        if state is None:
            body = {"built_at": None, "slots": {}, "macros": {}, "stats": {}, "turn": "", "builds": 0}
            return with_etag(Response(body), chat.integrity)
        slots = {SLOT[name].key: value for name, value in state.slots.items() if name in SLOT}
        body = {"built_at": state.built_at, "slots": slots, "macros": state.macros, "stats": state.stats}
        return with_etag(Response({**body, "turn": state.turn_type, "builds": state.builds}), chat.integrity)


class RecallOutputSerializer(serializers.Serializer):
    recall = serializers.DictField(allow_null=True, help_text="The message's extra.bme_recall, or null.")
    integrity = serializers.UUIDField(help_text="The chat's.")

    class Meta:
        ref_name = "MessageRecall"


class RecallEditSerializer(StorableInputSerializer):
    injection_text = serializers.CharField(max_length=20000, allow_blank=True)

    class Meta:
        ref_name = "MessageRecallEdit"


def _recall_response(chat, record) -> Response:
    return with_etag(Response({"recall": record, "integrity": chat.integrity}), chat.integrity)


class RecallApi(APIView):
    @extend_schema(operation_id="recall_retrieve", responses=RecallOutputSerializer)
    def get(self, request, chat_id: int, index: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        message = chat_selectors.message_get(chat=chat, index=index)
        return _recall_response(chat, recall_stored(message))

    @extend_schema(
        operation_id="recall_edit",
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY, MIRROR],
        request=RecallEditSerializer,
        responses=RecallOutputSerializer,
        description="Replace the injection text of the message's recall (kept when the same message is asked "
        "about again). Needs the chat's integrity (If-Match).",
    )
    @idempotent
    def patch(self, request, chat_id: int, index: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        chat_selectors.message_get(chat=chat, index=index)
        serializer = RecallEditSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        record, chat = recall_edit(
            chat=chat,
            index=index,
            text=serializer.validated_data["injection_text"],
            integrity=request_integrity(request, required=True),
            mirror=mirrors_file(request),
        )
        return _recall_response(chat, record)

    @extend_schema(
        operation_id="recall_delete",
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY, MIRROR],
        responses=RecallOutputSerializer,
        description="Remove the message's recall. Needs the chat's integrity (If-Match).",
    )
    @idempotent
    def delete(self, request, chat_id: int, index: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        chat_selectors.message_get(chat=chat, index=index)
        integrity = request_integrity(request, required=True)
        chat = recall_store(chat=chat, index=index, record=None, integrity=integrity, mirror=mirrors_file(request))
        return _recall_response(chat, None)


class RecallRerunApi(APIView):
    @extend_schema(
        operation_id="recall_rerun",
        parameters=[IF_MATCH_REQUIRED, IDEMPOTENCY_KEY, MIRROR],
        request=None,
        responses=RecallOutputSerializer,
        description="Search again for the user message and overwrite its recall. Needs the chat's integrity.",
    )
    @idempotent
    def post(self, request, chat_id: int, index: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        chat_selectors.message_get(chat=chat, index=index)
        integrity = request_integrity(request, required=True)
        record, chat = recall_rerun(
            user=request.user, chat=chat, index=index, integrity=integrity, mirror=mirrors_file(request)
        )
        return _recall_response(chat, record)


class InjectionSettingsSerializer(serializers.Serializer):
    settings = serializers.DictField(help_text="The smart_memory namespace, every value filled in.")
    problems = serializers.ListField(child=serializers.CharField(), help_text="Values replaced by their default.")
    integrity = serializers.UUIDField(help_text="The settings document's (PATCH /api/v1/settings with it).")

    class Meta:
        ref_name = "InjectionSettings"


class InjectionSettingsApi(APIView):
    @extend_schema(
        operation_id="injection_settings_retrieve",
        responses=InjectionSettingsSerializer,
        description="The injection settings as the context builder reads them (defaults filled in). Change them "
        "with `PATCH /api/v1/settings` (namespace `smart_memory`) and the integrity given here.",
    )
    def get(self, request):
        document = settings_document_get(user=request.user)
        settings = injection_settings_get(user=request.user, document=document)
        body = {"settings": settings.as_document(), "problems": settings.problems, "integrity": document.integrity}
        return with_etag(Response(InjectionSettingsSerializer(body).data), document.integrity)
