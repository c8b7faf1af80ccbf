"""The gateway's wiring seen from a browser: a front end served from another origin may call it."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from apps.chats.models import Chat
from apps.generation.models import Generation
from apps.generation.services.stream import open_streams
from tests.generation.faults import fail_relaying_after
from tests.llm_server import Reply

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


def test_a_person_over_their_cap_is_refused_before_the_history_is_read(client, token, llm, user, settings):
    """A script sending request after request past the person's cap on streams costs the server one count, not the
    parse, match and comparison of a long history (and nothing is written)."""
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.chats.services.chats import chat_create
    from apps.generation.models import Generation

    settings.LOREKEEPER_GENERATION = {**settings.LOREKEEPER_GENERATION, "streams_per_user": 1}
    busy = chat_create(user=user, title="Busy")
    Generation.objects.create(
        user=user, chat=busy, mode="new", state="streaming", lease_until=timezone.now() + timedelta(minutes=5)
    )  # fmt: skip
    history = [{"role": "system", "content": "Write Mira's next reply."}]
    history += [{"role": "user" if n % 2 else "assistant", "content": f"Line {n}."} for n in range(400)]
    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            "/v1/chat/completions", {"model": "scripted", "messages": history}, content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "X-Lorekeeper-Chat": str(busy.pk)},
        )  # fmt: skip
    assert response.status_code == 429 and response.json()["error"]["code"] == "too_many_streams"
    read = " ".join(query["sql"] for query in queries.captured_queries)
    assert "chats_message" not in read and "chats_chat" not in read and "llm_connection" not in read
    assert busy.messages.count() == 0


def test_text_holding_a_nul_is_refused_naming_its_field_or_kept_without_it(client, token, llm, user):
    """PostgreSQL stores and compares no text holding NUL: each of the request's texts that reaches it is refused
    (400 or 404, naming the field) or kept without the NUL, never a 500, and a refusal writes nothing."""
    headers = {"Authorization": f"Bearer {token}"}
    hello = [{"role": "user", "content": "Hi"}]

    def ask(**body):
        return client.post("/v1/chat/completions", {"model": "scripted", "messages": hello, **body},
                           content_type="application/json", headers=headers)  # fmt: skip

    response = client.get("/v1/models/scr%00ipted", headers=headers)
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"
    response = ask(model="scripted\x00")
    assert response.status_code == 404 and response.json()["error"]["param"] == "model"
    response = ask(lorekeeper_chat="story\x00one")
    assert response.status_code == 400 and response.json()["error"]["param"] == "lorekeeper_chat"
    response = ask(stop=["\x00"])
    assert response.status_code == 400 and response.json()["error"]["param"] == "stop"
    assert not Chat.objects.filter(user=user).exists()

    named = [{"role": "assistant", "name": "Mi\x00ra", "content": "Welcome."}, {"role": "user", "name": "Ro\x00wan",
             "content": "Hi"}]  # fmt: skip
    response = ask(messages=named)
    assert response.status_code == 200, response.content[:300]
    chat = Chat.objects.get(user=user)
    assert chat.user_name == "Rowan" and [c.name for c in chat.characters.all()] == ["Mira"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [({"model": "scri\ud800pted"}, 404, "model"), ({"lorekeeper_chat": "story\udfff"}, 400, "lorekeeper_chat"),
     ({"stop": ["\ud800"]}, 400, "stop")],
)  # fmt: skip
def test_a_field_holding_a_lone_surrogate_is_refused_naming_it(client, token, llm, user, body, status, field):
    """A lone UTF-16 surrogate (valid in JSON's escapes, not in Unicode) is no text PostgreSQL or a digest can
    take: refused naming the field, never a 500, and nothing is written."""
    response = client.post(
        "/v1/chat/completions", {"model": "scripted", "messages": [{"role": "user", "content": "Hi"}], **body},
        content_type="application/json", headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k1"},
    )  # fmt: skip
    assert response.status_code == status, response.content[:300]
    assert response.json()["error"]["param"] == field
    assert not Chat.objects.filter(user=user).exists()


def test_messages_holding_lone_surrogates_are_kept_without_them(client, token, llm, user):
    """A front end that cut an emoji's pair in two sends the half with every later turn: the history is kept without
    it (as without a NUL), so the chat goes on, and the same request again is the same request."""
    messages = [{"role": "system", "content": "A story.\udc00"}, {"role": "assistant", "name": "Mi\ud800ra",
                "content": "Welcome \ud83d."}, {"role": "user", "content": "Hi \ud83d\ude00\ud83d there"}]  # fmt: skip
    for _ in range(2):
        response = client.post(
            "/v1/chat/completions", {"model": "scripted", "messages": messages}, content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k2"},
        )  # fmt: skip
        assert response.status_code == 200, response.content[:300]
    chat = Chat.objects.get(user=user)
    said = list(chat.messages.order_by("index").values_list("name", "mes"))
    assert [mes for _, mes in said] == ["Welcome .", "Hi \U0001f600 there", said[2][1]] and said[0][0] == "Mira"
    assert chat.messages.count() == 3


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_json_is_a_415_in_openais_shape(client, token, llm, user, content_type):
    """`curl -d '{…}'` without a header sends a form's type: it was read as a form, and answered "`messages` is a
    non-empty list" about a body that held them."""
    response = client.post(
        "/v1/chat/completions",
        json.dumps({"model": "scripted", "messages": [{"role": "user", "content": "Hi"}]}),
        content_type=content_type,
        headers={"Authorization": f"Bearer {token}"},
    )
    error = response.json()["error"]
    assert response.status_code == 415 and error["type"] == "invalid_request_error"
    said = f"`Content-Type: application/json` (this one came as {content_type})"
    assert error["param"] == "Content-Type" and said in error["message"]
    assert not Chat.objects.filter(user=user).exists()


def test_a_system_prompt_longer_than_a_message_reaches_the_model_whole(client, token, llm, user):
    """A front end's system prompt, its lorebook entries in it, may pass a message's 100,000 characters: it is sent
    to the model, not stored as a message."""
    llm.server.default.content = "The lantern is lit."
    system = "Mira keeps the lighthouse. " * 6_000  # 162,000 characters
    response = client.post(
        "/v1/chat/completions",
        {"model": "scripted", "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}]},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.content[:300]
    assert response.json()["choices"][0]["message"]["content"] == "The lantern is lit."
    assert llm.server.requests[-1]["body"]["messages"][0] == {"role": "system", "content": system}
    assert [m.mes for m in Chat.objects.get(user=user).messages.order_by("index")] == ["Hi", "The lantern is lit."]


def test_a_chat_named_0_in_the_body_is_looked_for_not_ignored(client, token, llm, user):
    """`"lorekeeper_chat": 0` names chat 0, which is no one's: a 404, not a chat guessed from the messages."""
    response = client.post(
        "/v1/chat/completions",
        {"model": "scripted", "messages": [{"role": "user", "content": "Hi"}], "lorekeeper_chat": 0},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 404 and response.json()["error"]["type"] == "invalid_request_error"
    assert not Chat.objects.filter(user=user).exists()


def test_a_fault_of_lorekeepers_own_is_a_500_server_error_not_the_models(client, token, llm, user, monkeypatch):
    """A reply that failed because Lorekeeper itself failed relaying it (injected here at the third piece) is not
    answered as the model's failure: a person would look for the fault in a model that did nothing wrong. The model's
    own failure stays a 502 `model_failed`."""
    fail_relaying_after(monkeypatch, 2)
    llm.server.on(lambda prompt: True, Reply("One ship came in late tonight under a torn sail", tokens_per_second=50))

    def ask(text: str):
        return client.post(
            "/v1/chat/completions", {"model": "scripted", "messages": [{"role": "user", "content": text}]},
            content_type="application/json", headers={"Authorization": f"Bearer {token}"},
        )  # fmt: skip

    response = ask("Any ships?")
    error = response.json()["error"]
    assert response.status_code == 500, response.content
    assert (error["type"], error["code"]) == ("server_error", "server_error")
    assert error["message"].startswith("Lorekeeper failed: ") and "relaying" in error["message"]
    generation = Generation.objects.get(user=user)
    assert (generation.state, generation.stop_reason) == ("failed", "server")

    monkeypatch.undo()  # relaying works again
    llm.server.on(lambda prompt: True, Reply(status=401))
    response = ask("Any ships at all?")
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_failed", response.content
