"""The OpenAI-compatible gateway: `GET /v1/models` and `POST /v1/chat/completions`, authenticated by a Lorekeeper
API token given as the API key, answering in OpenAI's shapes, errors included
(`{"error": {"message", "type", "param", "code"}}`), so that an OpenAI client reads them unchanged
(docs/GATEWAY.md)."""

from __future__ import annotations

import time

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions as drf_exceptions
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.authentication import BearerTokenAuthentication
from apps.common.exceptions import ApplicationError
from apps.common.handler import ARRIVED, client_left
from apps.common.parsers import LimitedJSONParser
from apps.common.views import EventStreamResponse, may_close
from apps.gateway import selectors
from apps.gateway.services.complete import (
    completion_body,
    completion_chunks,
    completion_prepare,
    completion_replayed,
    failed_status,
    model_failed,
)
from apps.generation.models import Generation
from apps.generation.services.lease import StreamsBusy
from apps.generation.services.stream import generation_events, generation_left, reply_whole

CHAT_HEADER = "X-Lorekeeper-Chat"
INVALID = "invalid_request_error"
TYPES = {400: INVALID, 401: INVALID, 403: "permission_error", 404: INVALID, 409: "conflict_error", 413: INVALID,
         415: INVALID, 422: INVALID, 429: "rate_limit_error", 503: "server_error"}  # fmt: skip
CODES = {401: "invalid_api_key", 404: "not_found", 413: "request_too_large", 429: "rate_limit_exceeded"}


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None, headers=None) -> Response:
    body = {"message": message, "type": TYPES.get(status, "api_error"), "param": param,
            "code": code or CODES.get(status)}  # fmt: skip
    return Response({"error": body}, status=status, headers=headers)


def _detail(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_detail(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_detail(value) for value in detail)
    return str(detail)


def gateway_exception_handler(exc: Exception, context: dict) -> Response | None:
    """Every error in OpenAI's shape, with its status (and `Retry-After` where one says when to ask again)."""
    if isinstance(exc, ApplicationError):
        headers = exc.headers(may_close=may_close(context.get("request"))) if isinstance(exc, StreamsBusy) else None
        field = exc.extra.get("field") if isinstance(exc.extra, dict) else None
        return _error(exc.status, exc.message, param=field, code=exc.code, headers=headers)
    if isinstance(exc, Http404 | ObjectDoesNotExist):
        return _error(404, str(exc) or "Not found.")
    if isinstance(exc, DjangoValidationError):
        return _error(400, " ".join(exc.messages))
    if isinstance(exc, drf_exceptions.APIException):
        status = exc.status_code
        if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
            status = 401
            headers = {"WWW-Authenticate": 'Bearer realm="api"'}
        elif isinstance(exc, drf_exceptions.Throttled):
            headers = {"Retry-After": str(int(exc.wait or 1))}
        elif isinstance(exc, drf_exceptions.UnsupportedMediaType):  # `curl -d '{…}'` sends a form's type
            came = getattr(context.get("request"), "content_type", "") or "no type"
            return _error(415, f"Send the body as JSON, with `Content-Type: application/json` (this one came as "
                               f"{came}).", param="Content-Type")  # fmt: skip
        else:
            headers = None
        return _error(status, _detail(exc.detail), headers=headers)
    return None


class GatewayApi(APIView):
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer]
    parser_classes = [LimitedJSONParser]  # OpenAI's API reads JSON only: a form's body is not read as one

    def get_exception_handler(self):
        return gateway_exception_handler


def _model(connection) -> dict:
    return {"id": connection.name, "object": "model", "created": int(connection.created_at.timestamp()),
            "owned_by": "lorekeeper"}  # fmt: skip


class ModelListApi(GatewayApi):
    @extend_schema(exclude=True)
    def get(self, request):
        return Response({"object": "list", "data": [_model(c) for c in selectors.model_list(user=request.user)]})


class ModelGetApi(GatewayApi):
    @extend_schema(exclude=True)
    def get(self, request, model: str):
        return Response(_model(selectors.connection_for_model(user=request.user, model=model)))


class ChatCompletionApi(GatewayApi):
    @extend_schema(exclude=True)
    def post(self, request):
        started = time.perf_counter()
        arrived = getattr(request, "scope", {}).get(ARRIVED)  # under ASGI, when the request reached the application
        body = request.data
        if not isinstance(body, dict):
            raise ApplicationError("The body is a JSON object.", {"field": "body"})
        stream = body.get("stream", False)
        if not isinstance(stream, bool | None):
            raise ApplicationError("`stream` is true or false.", {"field": "stream"})
        stream_options = body.get("stream_options") or {}
        if not isinstance(stream_options, dict):
            raise ApplicationError("`stream_options` is an object.", {"field": "stream_options"})
        key = request.headers.get("Idempotency-Key", "").strip()
        if len(key) > 200:
            raise ApplicationError("An Idempotency-Key holds at most 200 characters.", {"field": "Idempotency-Key"})
        completion = completion_prepare(
            user=request.user,
            body=body,
            chat_header=request.headers.get(CHAT_HEADER, ""),
            idempotency_key=key,
            started=started,
            arrived=arrived,
        )
        headers = {CHAT_HEADER: str(completion.generation.chat_id)}
        if completion.fresh:
            events = generation_events(completion.generation)
        elif completion.generation.state == Generation.State.STREAMING:
            raise ApplicationError(
                "This request is still generating; ask again when it has ended.", {"field": "Idempotency-Key"},
                status=409, code="generation_in_progress",
            )  # fmt: skip
        else:
            events = completion_replayed(completion)
        if stream:
            chunks = completion_chunks(completion, events, include_usage=stream_options.get("include_usage") is True)
            # A retry's generation has ended (one still streaming was refused above): left as it ended.
            response = EventStreamResponse(chunks, on_close=lambda: generation_left(completion.generation))
            response[CHAT_HEADER] = headers[CHAT_HEADER]
            return response
        event = reply_whole(completion.generation, events, left=client_left(request))
        if event.name == "error":
            return Response(model_failed(event.data), status=failed_status(event.data), headers=headers)
        return Response(completion_body(completion, event), headers=headers)
