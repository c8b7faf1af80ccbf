"""`stream_chat` against the scripted model over real HTTP, through both APIs: deltas as they come, think blocks and
reasoning fields never shown, a person's Stop closing the HTTP stream, a model failing mid-answer, refusals and
time-outs before the first token, the outbound-call guard, and a Call record of every stream.

pytest-asyncio is not installed: each test drives the async generator with `asyncio.run`. The Call is written
through `sync_to_async` (another thread, another database connection), hence `transaction=True`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from apps.common.netguard import BLOCKED_MESSAGE
from apps.llm.client import LlmError
from apps.llm.models import Call
from apps.llm.profiles import connection_context_size
from apps.llm.services import connection_create, connection_update
from apps.llm.streaming import StreamEnd, stream_chat
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-test-1234567890abcd"
HELLO = [{"role": "system", "content": "You are Mira."}, {"role": "user", "content": "Say hello to Ada"}]
BOTH_APIS = pytest.mark.parametrize("api", ["openai", "ollama"])
STORY = "Mira lifts the lantern and the corridor fills with a pale green light that hums softly."


@pytest.fixture(autouse=True)
def _close_the_recording_threads_connection():
    """The Call is saved in asgiref's thread for sync code; its database connection is closed there at the end."""
    yield
    asyncio.run(sync_to_async(connections.close_all)())


def _header(request: dict, name: str) -> str | None:
    return next((v for k, v in request["headers"].items() if k.lower() == name.lower()), None)


def _connection(user, server, api, **fields):
    base_url = server.url if api == "openai" else server.ollama_url
    fields.setdefault("api_key", KEY)
    return connection_create(user=user, name=f"scripted {api}", api=api, base_url=base_url, model="m", **fields)


def _deltas(connection, messages=HELLO, **kwargs) -> list[str]:
    async def collect():
        stream = stream_chat(connection, messages, purpose="chat", user_id=connection.user_id, **kwargs)
        return [delta async for delta in stream]

    return asyncio.run(collect())


def _fails_after(connection, messages=HELLO) -> tuple[list[str], LlmError]:
    """The deltas yielded before the stream raised, and the error."""
    seen: list[str] = []

    async def collect():
        async for delta in stream_chat(connection, messages, purpose="chat", user_id=connection.user_id):
            seen.append(delta)

    with pytest.raises(LlmError) as caught:
        asyncio.run(collect())
    return seen, caught.value


def _wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


# ------------------------------------------------------------------------------------------------ the reply


@BOTH_APIS
def test_the_reply_arrives_as_the_model_sends_it_and_is_recorded(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(STORY, tokens_per_second=50))  # a word every 20 ms: each read brings one

    deltas = _deltas(connection)

    assert deltas == [word if n == 0 else f" {word}" for n, word in enumerate(STORY.split())]
    call = Call.objects.get()
    assert (call.user, call.connection, call.purpose, call.model) == (user, connection, "chat", "m")
    assert (call.status, call.error, call.attempts, call.response) == ("ok", "", 1, STORY)
    # The server's usage figures (words of the prompt and of the answer), not an estimate.
    assert (call.prompt_tokens, call.completion_tokens, call.tokens_estimated) == (7, 16, False)
    [request] = llm_server.requests
    assert request["body"]["stream"] is True and request["body"]["messages"] == HELLO


@BOTH_APIS
def test_a_model_that_says_it_stopped_at_its_length_is_heard_in_either_api(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    for finish, length in (("length", True), ("stop", False)):
        llm_server.on("Say hello", Reply(STORY, finish=finish))
        end = StreamEnd()
        assert "".join(_deltas(connection, end=end)) == STORY
        assert end.length is length, finish


@BOTH_APIS
def test_the_reply_length_and_samplers_are_the_connections_own(user, llm_server, api):
    connection = _connection(user, llm_server, api, reply_tokens=123, sampler={"temperature": 0.9, "top_k": 40})
    _deltas(connection)
    body = llm_server.requests[0]["body"]
    if api == "openai":
        assert (body["max_tokens"], body["temperature"], body["top_k"]) == (123, 0.9, 40)
        assert "top_p" not in body and "stop" not in body
    else:
        size = connection_context_size(connection)
        assert body["options"] == {"num_predict": 123, "temperature": 0.9, "top_k": 40, "num_ctx": size}


@BOTH_APIS
def test_max_tokens_and_sampler_given_replace_the_connections(user, llm_server, api):
    connection = _connection(user, llm_server, api, reply_tokens=123, sampler={"temperature": 0.9, "top_k": 40})
    _deltas(connection, max_tokens=50, sampler={"stop": ["\nAda:"], "seed": 7})
    body = llm_server.requests[0]["body"]
    if api == "openai":
        assert (body["max_tokens"], body["stop"], body["seed"]) == (50, ["\nAda:"], 7)
        assert "temperature" not in body and "top_k" not in body
    else:
        size = connection_context_size(connection)
        assert body["options"] == {"num_predict": 50, "stop": ["\nAda:"], "seed": 7, "num_ctx": size}


def test_an_ollama_context_window_is_sent_as_num_ctx(user, llm_server):
    _deltas(_connection(user, llm_server, "ollama", context_window=4096))
    assert llm_server.requests[0]["body"]["options"]["num_ctx"] == 4096


def test_without_a_context_window_ollama_is_told_the_size_the_prompt_was_built_for(user, llm_server):
    connection = _connection(user, llm_server, "ollama")
    _deltas(connection)
    assert llm_server.requests[0]["body"]["options"]["num_ctx"] == connection_context_size(connection) > 2048


@BOTH_APIS
def test_the_key_goes_only_in_the_authorization_header(user, llm_server, api):
    _deltas(_connection(user, llm_server, api))
    [request] = llm_server.requests
    assert _header(request, "Authorization") == f"Bearer {KEY}"
    assert KEY not in str(request["body"]) and KEY not in str(Call.objects.values().get())


@BOTH_APIS
def test_without_usage_the_tokens_are_counted_here(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply("Hello, Ada.", usage=False))
    _deltas(connection)
    call = Call.objects.get()
    assert call.tokens_estimated and call.prompt_tokens > 0 and call.completion_tokens > 0


@BOTH_APIS
def test_many_streams_at_once_are_served(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(STORY, tokens_per_second=20))

    async def one():
        return "".join([d async for d in stream_chat(connection, HELLO, purpose="chat", user_id=user.pk)])

    async def many():
        return await asyncio.gather(*(one() for _ in range(6)))

    started = time.monotonic()
    assert asyncio.run(many()) == [STORY] * 6
    # Six streams of 16 chunks 50 ms apart side by side (0.8 s), not one after the other (4.8 s).
    assert time.monotonic() - started < 3
    assert Call.objects.filter(status="ok").count() == 6


# ------------------------------------------------------------------------------------------------ thinking


@BOTH_APIS
def test_a_think_block_at_the_start_is_never_yielded(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", "<think>Ada is an old friend; keep it warm.</think>\n\nHello, Ada! Come in.")

    deltas = _deltas(connection)

    assert "".join(deltas) == "Hello, Ada! Come in."
    assert not any("think" in delta or "friend" in delta for delta in deltas)
    call = Call.objects.get()
    assert (call.response, call.reasoning) == ("Hello, Ada! Come in.", "Ada is an old friend; keep it warm.")


@BOTH_APIS
def test_a_reasoning_field_is_never_yielded(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply("Hello, Ada.", reasoning="She likes tea."))

    assert "".join(_deltas(connection)) == "Hello, Ada."
    assert Call.objects.get().reasoning == "She likes tea."


def test_a_reply_cut_while_thinking_yields_nothing_and_keeps_the_thought(user, llm_server):
    connection = _connection(user, llm_server, "openai")
    llm_server.on("Say hello", "<think>Ada knocks twice, which means")

    assert _deltas(connection) == []
    call = Call.objects.get()
    assert (call.status, call.response, call.reasoning) == ("ok", "", "Ada knocks twice, which means")


# ------------------------------------------------------------------------------------------------ stopping


@BOTH_APIS
def test_closing_the_generator_closes_the_http_stream_and_records_a_stopped_call(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(STORY, tokens_per_second=20))

    async def read_two_then_stop():
        async with contextlib.aclosing(stream_chat(connection, HELLO, purpose="chat", user_id=user.pk)) as deltas:
            return [await anext(deltas), await anext(deltas)]

    started = time.monotonic()
    assert "".join(asyncio.run(read_two_then_stop())) == "Mira lifts"
    assert time.monotonic() - started < 2  # the rest (about 0.7 s more) was not waited for
    call = Call.objects.get()
    assert (call.status, call.error) == ("stopped", "")
    assert call.response.startswith("Mira lifts") and call.response != STORY
    assert _wait_for(lambda: llm_server.requests[0].get("client_gone"))


@BOTH_APIS
def test_cancelling_the_task_closes_the_http_stream(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(STORY, tokens_per_second=10))
    seen: list[str] = []

    async def read():
        async for delta in stream_chat(connection, HELLO, purpose="chat", user_id=user.pk):
            seen.append(delta)

    async def stop_after_a_moment():
        task = asyncio.create_task(read())
        await asyncio.sleep(0.35)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(stop_after_a_moment())

    assert 1 <= len(seen) < len(STORY.split())
    assert Call.objects.get().status == "stopped"
    assert _wait_for(lambda: llm_server.requests[0].get("client_gone"))


# ------------------------------------------------------------------------------------------------ failures


@BOTH_APIS
def test_a_model_failing_mid_stream_raises_after_the_partial_reply(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(STORY, fail_after=3))

    seen, error = _fails_after(connection)

    assert "".join(seen) == "Mira lifts the"
    assert error.message == "the connection to the model broke off in the middle of its answer"
    assert error.call == Call.objects.get()
    assert (error.call.status, error.call.error, error.call.response) == ("error", error.message, "Mira lifts the")
    assert len(llm_server.requests) == 1  # text was shown: no retry


def _events(*events: str) -> Reply:
    """A raw OpenAI-compatible stream, as some servers write it."""
    return Reply(raw="".join(events), headers={"Content-Type": "text/event-stream"})


def _chunk(delta: dict, **fields) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta}], **fields}) + "\n\n"


def test_comments_other_fields_and_a_data_field_without_its_space_are_read_as_servers_send_them(user, llm_server):
    llm_server.on("Say hello", _events(
        ": keep-alive, as OpenRouter sends while it waits\n\n",
        "event: message\nid: 1\n" + _chunk({"content": "Hello"}),
        "data:" + json.dumps({"choices": [{"delta": {"content": ", Ada."}}]}) + "\n\n",
        _chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 3}),
        "data: [DONE]\n\n",
        _chunk({"content": " Never read after [DONE]."}),
    ))  # fmt: skip

    assert _deltas(_connection(user, llm_server, "openai")) == ["Hello, Ada."]  # what one read brought, joined
    call = Call.objects.get()
    assert (call.status, call.prompt_tokens, call.completion_tokens, call.tokens_estimated) == ("ok", 9, 3, False)


def test_an_error_event_in_the_middle_fails_after_the_partial_reply_and_hides_the_servers_words(user, llm_server):
    llm_server.on("Say hello", _events(
        _chunk({"content": "Mira lifts"}),
        "data: " + json.dumps({"error": {"message": "upstream secret-host-42 overloaded"}}) + "\n\n",
    ))  # fmt: skip

    seen, error = _fails_after(_connection(user, llm_server, "openai"))

    assert seen == ["Mira lifts"]
    assert error.message == "the model reported an error in the middle of its answer"
    assert "secret-host" not in error.call.error


@pytest.mark.parametrize(
    "event", ["data: {not json\n\n", "data: [1, 2]\n\n", _chunk("a string"), _chunk({}, usage="many")]
)
def test_an_event_that_is_not_a_chunk_is_an_unreadable_answer(user, llm_server, event):
    llm_server.on("Say hello", _events(event))
    seen, error = _fails_after(_connection(user, llm_server, "openai"))
    assert (seen, error.message) == ([], "unreadable answer: not a chat completion stream")


def test_a_server_that_ignores_stream_and_answers_json_is_read_whole(user, llm_server):
    answer = {"choices": [{"message": {"content": "Hello, Ada.", "reasoning_content": "Be brief."}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 3}}  # fmt: skip
    llm_server.on("Say hello", Reply(raw=json.dumps(answer)))

    assert _deltas(_connection(user, llm_server, "openai")) == ["Hello, Ada."]
    call = Call.objects.get()
    assert (call.response, call.reasoning, call.completion_tokens) == ("Hello, Ada.", "Be brief.", 3)


@BOTH_APIS
def test_a_refused_key_fails_before_the_first_token_without_retrying(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(status=401))

    seen, error = _fails_after(connection)

    assert seen == []
    assert error.message == "the server refused the request (401): Unauthorized"
    assert "scripted failure" not in error.message  # the server's body is never shown
    assert (error.call.status, error.call.attempts, error.call.error) == ("error", 1, error.message)
    assert len(llm_server.requests) == 1


@BOTH_APIS
def test_429_before_the_first_token_is_retried(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(status=429, headers={"retry-after": "0"}), times=2)
    llm_server.on("Say hello", "Hello, Ada.", times=None)
    llm_server.on("Say hello", Reply(status=429, headers={"retry-after": "0"}), times=2)

    assert "".join(_deltas(connection)) == "Hello, Ada."
    assert (Call.objects.get().attempts, len(llm_server.requests)) == (3, 3)


@BOTH_APIS
def test_a_server_error_every_time_names_the_status(user, llm_server, api):
    llm_server.on("Say hello", Reply(status=503))
    seen, error = _fails_after(_connection(user, llm_server, api))
    assert (seen, error.message) == ([], "server error 503 (after 4 attempts)")


@BOTH_APIS
def test_a_host_that_does_not_listen_fails_with_cannot_connect(user, llm_server, api, settings):
    """Tried once more, not three times: a person watching a reply with a wrong port waited 10-14 s to be told."""
    settings.LOREKEEPER_LLM = {**settings.LOREKEEPER_LLM, "retries": 3}
    connection = _connection(user, llm_server, api)
    llm_server.stop()

    seen, error = _fails_after(connection)

    assert (seen, error.message) == ([], f"cannot connect to {connection.base_url} (after 2 attempts)")
    assert error.call.attempts == 2
    assert (error.call.prompt_tokens, error.call.tokens_estimated) == (0, False)  # nothing was spent


@BOTH_APIS
def test_silence_before_the_first_token_times_out_after_the_connections_timeout(user, llm_server, api):
    connection = connection_update(connection=_connection(user, llm_server, api), data={"timeout": 1})
    llm_server.on("Say hello", Reply("too late", delay=1.5))

    started = time.monotonic()
    seen, error = _fails_after(connection)

    assert time.monotonic() - started < 1.45
    assert (seen, error.message) == ([], "timed out after 1 s before the first token")
    assert (error.call.status, error.call.attempts) == ("error", 1)


def test_a_stream_to_a_private_address_is_refused_on_a_public_deployment(user, llm_server, settings):
    connection = _connection(user, llm_server, "openai")
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False

    seen, error = _fails_after(connection)

    assert (seen, error.message) == ([], BLOCKED_MESSAGE)
    assert llm_server.requests == [] and error.call.status == "error"


def test_stored_samplers_out_of_range_fail_before_any_request(user, llm_server):
    connection = _connection(user, llm_server, "openai")
    with pytest.raises(LlmError) as caught:
        _deltas(connection, sampler={"temperature": 7})
    assert caught.value.message == "temperature is between 0 and 2." and llm_server.requests == []


@pytest.mark.parametrize(
    "body",
    [
        "data: " + "[" * 200_000 + "\n\n",  # nested past what the parser follows
        "data: " + "x" * (2**20 + 10),  # a line that never ends
    ],
)
def test_an_answer_a_parser_cannot_follow_is_an_unreadable_answer_not_a_crash(user, llm_server, body):
    llm_server.on("Say hello", _events(body))
    seen, error = _fails_after(_connection(user, llm_server, "openai"))
    assert (seen, error.message) == ([], "unreadable answer: not a chat completion stream")
