"""The gateway's wiring seen from a browser: a front end served from another origin may call it."""

from __future__ import annotations

import pytest

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
