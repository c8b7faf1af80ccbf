"""Generating a reply over the API: `POST chats/{id}/generate` streams it as Server-Sent Events (or answers the
stored message as JSON), and `GET chats/{id}/messages/{index}/prompt` shows what the model was given."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.chats.apis.common import valid
from apps.common.exceptions import ApplicationError
from apps.common.handler import client_left
from apps.common.integrity import IDEMPOTENCY_KEY, IF_MATCH, request_integrity
from apps.common.serializers import StorableInputSerializer
from apps.common.views import EventStreamResponse, may_close
from apps.generation import selectors
from apps.generation.models import Generation
from apps.generation.services.generate import generation_prepare
from apps.generation.services.lease import StreamsBusy
from apps.generation.services.stream import Event, generation_events, generation_left, replay_event, reply_whole

EVENT_STATUS = {"done": 200, "conflict": 409, "error": 502}


class GenerateInputSerializer(StorableInputSerializer):
    message = serializers.CharField(
        required=False, allow_blank=True, max_length=100_000, help_text="The person's message (mode `new`).",
        error_messages={"max_length": "A message holds at most {max_length} characters: send it in parts."},
    )  # fmt: skip
    mode = serializers.ChoiceField(
        Generation.Mode.choices,
        default=Generation.Mode.NEW,
        help_text="new: a reply (to `message`, if given); swipe: another version of the last reply; continue: "
        "more of the last reply; impersonate: a draft of the person's next message (not stored).",
    )
    character = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Who replies in a group: a name or an id."
    )
    connection = serializers.IntegerField(required=False, min_value=1, help_text="A model connection; the default.")
    stream = serializers.BooleanField(default=True, help_text="Server-Sent Events (default), or JSON when false.")
    integrity = serializers.UUIDField(required=False, help_text="Or send it as If-Match.")

    class Meta:
        ref_name = "GenerateInput"


class GeneratedSerializer(serializers.Serializer):
    generation = serializers.UUIDField()
    state = serializers.ChoiceField(Generation.State.choices)
    mode = serializers.ChoiceField(Generation.Mode.choices)
    text = serializers.CharField(help_text="The reply (for impersonate: the draft).")
    index = serializers.IntegerField(allow_null=True, help_text="The message it was stored in.")
    swipe_id = serializers.IntegerField(allow_null=True)
    message = serializers.DictField(allow_null=True, help_text="The stored message, as SillyTavern shapes it.")
    integrity = serializers.UUIDField(help_text="The chat's integrity after the write.")
    reason = serializers.ChoiceField(
        Generation.Reason.choices,
        help_text="The bound that stopped the reply (state `stopped`); for a failed one, `server` or `lease` when "
        "Lorekeeper itself failed (else the model did); or empty.",
    )
    detail = serializers.CharField(required=False, help_text="Why it did not end done, in words a person reads.")


SSE_DESCRIPTION = (
    "Server-Sent Events: `context` (the context is built: the prompt's size, the turn's recall), `delta` "
    '(`{"text"}`, as the model writes), then one of `done` (the stored message and the chat\'s integrity, as in '
    "the JSON answer), `error` (the model failed: what arrived is stored, marked failed) or `conflict` (the chat "
    "changed elsewhere meanwhile: the reply is in the event, not in the chat). Closing the connection stops the "
    "model; what arrived is stored, marked stopped. A bound (the reply's length, the message limit, the total "
    "time, the time between tokens) stops it too: `done` with state `stopped`, `reason` and `detail`."
)


def sse(event: Event) -> bytes:
    return f"event: {event.name}\ndata: {json.dumps(event.data, ensure_ascii=False)}\n\n".encode()


async def _stream(events: AsyncGenerator[Event, None]) -> AsyncGenerator[bytes, None]:
    async with aclosing(events):  # closed with this stream: a reply left mid-way is stored as it was left
        async for event in events:
            yield sse(event)


async def _one(event: Event) -> AsyncIterator[Event]:
    yield event


class EventStreamRenderer(BaseRenderer):
    """Lets a client ask for `text/event-stream` alone: a streamed answer is written by the view; an error answer
    (a 4xx before any streaming) comes as one `error` event holding the usual JSON error body."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return sse(Event("error", data if isinstance(data, dict) else {"detail": data}))


class ChatGenerateApi(APIView):
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, EventStreamRenderer]

    @extend_schema(
        operation_id="chats_generate",
        request=GenerateInputSerializer,
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
        responses={
            (200, "application/json"): GeneratedSerializer,
            (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description=SSE_DESCRIPTION),
            409: OpenApiResponse(description="A conflict (the chat changed: stale If-Match, or mid-stream), no "
                                 "model connection (`no_model`), or the same Idempotency-Key still generating."),
            429: OpenApiResponse(description="`too_many_streams`: the person's replies generating at once are at "
                                 "the cap; `Retry-After` says when to ask again."),
            500: OpenApiResponse(description="`server_error`: Lorekeeper failed relaying the reply, or the process "
                                 "streaming it died (`reason` `server` or `lease`; JSON answer)."),
            502: OpenApiResponse(description="`model_failed`: the model failed (JSON answer)."),
            503: OpenApiResponse(description="`server_busy`: this server streams as many replies as it can; "
                                 "`Retry-After`."),
        },
    )  # fmt: skip
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        data = valid(GenerateInputSerializer, request.data)
        key = request.headers.get("Idempotency-Key", "").strip()
        if len(key) > 200:
            raise ApplicationError("An Idempotency-Key holds at most 200 characters.", {"field": "Idempotency-Key"})
        try:
            prepared = generation_prepare(
                user=request.user,
                chat=chat,
                mode=data["mode"],
                message=data.get("message"),
                character=data.get("character") or None,
                connection_id=data.get("connection"),
                integrity=request_integrity(request, request.data),
                idempotency_key=key,
            )
        except StreamsBusy as exc:
            return Response(exc.body(), status=exc.status, headers=exc.headers(may_close=may_close(request)))
        generation = prepared.generation
        if not prepared.fresh:
            if generation.state == Generation.State.STREAMING:
                raise ApplicationError(
                    "This request is still generating; ask again when it has ended.",
                    status=409,
                    code="generation_in_progress",
                )
            return self._answer(replay_event(generation), stream=data["stream"])
        if data["stream"]:
            return EventStreamResponse(
                _stream(generation_events(generation)), on_close=lambda: generation_left(generation)
            )
        return self._answer(
            reply_whole(generation, generation_events(generation), left=client_left(request)), stream=False
        )

    def _answer(self, event: Event, *, stream: bool):
        if stream:
            return StreamingHttpResponse(_stream(_one(event)), content_type="text/event-stream")
        body = GeneratedSerializer(event.data).data
        status = EVENT_STATUS[event.name]
        if event.name == "error" and event.data.get("reason") in Generation.OUR_FAULTS:
            # Lorekeeper's own fault, not the model's: a person is not sent to look at a model that did no wrong.
            body = {"error": "server_error", **body}  # `detail` says what failed
            status = 500
        elif event.name != "done":
            body = {"error": "model_failed" if event.name == "error" else "conflict",
                    "message": event.data.get("detail", ""), **body}  # fmt: skip
        return Response(body, status=status)


class PromptMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField()


class GenerationPromptSerializer(serializers.Serializer):
    generation = serializers.UUIDField(source="uid")
    mode = serializers.CharField()
    state = serializers.CharField()
    model = serializers.CharField()
    api = serializers.CharField()
    prompt = PromptMessageSerializer(many=True)
    prompt_tokens = serializers.IntegerField()
    tokenizer = serializers.CharField(help_text="The tokenizer counted with, or `estimate`.")
    prompt_info = serializers.DictField(help_text="The budget and what the history kept.")
    text = serializers.CharField()
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class MessagePromptApi(APIView):
    @extend_schema(operation_id="chats_message_prompt", responses=GenerationPromptSerializer)
    def get(self, request, chat_id: int, index: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        generation = selectors.generation_for_message(user=request.user, chat=chat, index=index)
        generation.prompt = selectors.prompt_messages(generation=generation)  # the chat's runs, read out
        return Response(GenerationPromptSerializer(generation).data)
