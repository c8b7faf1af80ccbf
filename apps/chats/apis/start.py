"""Starting a chat with a character (or a group), and branching a chat at a message."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.apis.chats import ChatDetailSerializer
from apps.chats.models import ReplyOrder
from apps.chats.services.branch import chat_branch
from apps.chats.services.start import MAX_CHARACTERS, chat_start
from apps.common.idempotency import idempotent
from apps.common.integrity import IDEMPOTENCY_KEY, with_etag
from apps.common.serializers import StorableInputSerializer


def created(chat) -> Response:
    """201 with the chat as its detail API answers it, where it lives (Location) and its integrity (ETag)."""
    response = Response(ChatDetailSerializer(chat).data, status=status.HTTP_201_CREATED)
    response["Location"] = reverse("api:chat-detail", args=[chat.pk])
    return with_etag(response, chat.integrity)


class ChatStartInputSerializer(StorableInputSerializer):
    persona = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="One of your personas; by default your default one."
    )
    title = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=300,
        help_text="By default the name SillyTavern gives a new chat (`Name - 2026-5-1@09h03m07s042ms`).",
    )
    characters = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        max_length=MAX_CHARACTERS - 1,
        help_text="More of your characters, for a group chat: each one greets in this order, after this one.",
    )
    reply_order = serializers.ChoiceField(choices=ReplyOrder.choices, required=False, default=ReplyOrder.NATURAL)

    class Meta:
        ref_name = "ChatStartInput"


class CharacterChatStartApi(APIView):
    """Start a chat as SillyTavern starts one: a header, then each character's greeting (alternate greetings as
    its swipes, `{{char}}` and `{{user}}` resolved). A character or persona id that is not yours is a 404."""

    @extend_schema(
        operation_id="characters_chat_start",
        request=ChatStartInputSerializer,
        responses={201: ChatDetailSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def post(self, request, character_id: int):
        serializer = ChatStartInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        ids = [character_id, *data.get("characters", [])]
        characters = selectors.characters_get(user=request.user, character_ids=ids)
        persona = None
        if data.get("persona") is not None:
            persona = selectors.persona_get(user=request.user, persona_id=data["persona"])
        chat = chat_start(
            user=request.user,
            characters=characters,
            persona=persona,
            title=data.get("title", ""),
            reply_order=data["reply_order"],
        )
        return created(chat)


class ChatBranchInputSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=0, help_text="The last message the branch keeps (0-based).")

    class Meta:
        ref_name = "ChatBranchInput"


class ChatBranchApi(APIView):
    """A new chat holding the messages up to `index` (inclusive), as SillyTavern's Branch makes one
    (`chat_metadata.main_chat` names the chat it came from). The chat itself is unchanged."""

    @extend_schema(
        operation_id="chats_branch",
        request=ChatBranchInputSerializer,
        responses={201: ChatDetailSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def post(self, request, chat_id: int):
        chat = selectors.chat_get(user=request.user, chat_id=chat_id)
        serializer = ChatBranchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return created(chat_branch(chat=chat, index=serializer.validated_data["index"]))
