"""The gateway's wiring seen from a browser: a front end served from another origin may call it."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from apps.chats.models import Chat
from apps.generation.services.stream import open_streams

pytestmark = pytest.mark.django_db


def test_a_front_end_in_a_browser_may_call_the_gateway_with_its_chat_header(client):
    response = client.options(
        "/v1/chat/completions",
        HTTP_ORIGIN="http://127.0.0.1:8000",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type, x-lorekeeper-chat",
    )
    assert response["Access-Control-Allow-Origin"] == "http://127.0.0.1:8000"
    allowed = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "x-lorekeeper-chat"} <= allowed


def test_a_full_process_answers_503_in_openais_shape_and_closes_the_connection(async_client, token, llm, settings):
    """Under ASGI, as served (Django's AsyncClient): the client's retry connects afresh, to a worker with room."""
    settings.LOREKEEPER_GENERATION = {**settings.LOREKEEPER_GENERATION, "streams_per_process": 2, "retry_after": 3}
    open_streams.update({-1, -2})  # two streams of other people in this process
    try:
        response = async_to_sync(async_client.post)(
            "/v1/chat/completions", {"model": "scripted", "messages": [{"role": "user", "content": "Any ships?"}]},
            content_type="application/json", headers={"Authorization": f"Bearer {token}"},
        )  # fmt: skip
    finally:
        open_streams.difference_update({-1, -2})
    assert response.status_code == 503 and response["Retry-After"] == "3" and response["Connection"] == "close"
    assert response.json()["error"]["code"] == "server_busy" and response.json()["error"]["type"] == "server_error"
    assert not Chat.objects.filter(user=llm.user).exists()  # refused before anything was written
