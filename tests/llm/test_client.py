"""`complete()` against the scripted model over real HTTP, through both APIs: think blocks stripped, retries with
backoff on 429, 5xx, timeouts and refused connections, clear LlmErrors, a Call record of every request, keys only in
the Authorization header. Also the pieces the client stands on: prompt files and the token estimate."""

import asyncio
import contextlib
import time

import pytest

from apps.llm.client import LlmError, complete, complete_prompt
from apps.llm.models import Call
from apps.llm.prompts import Prompt, prompt_get, prompt_versions
from apps.llm.services import connection_create, connection_update
from apps.llm.tokens import PER_MESSAGE_OVERHEAD, count_message_tokens, count_tokens
from tests.llm_server import Reply, start_llm_server

pytestmark = pytest.mark.django_db

KEY = "sk-test-1234567890abcd"
HELLO = [{"role": "system", "content": "You greet people."}, {"role": "user", "content": "Say hello to Mira"}]
BOTH_APIS = pytest.mark.parametrize("api", ["openai", "ollama"])
PATHS = {"openai": "/v1/chat/completions", "ollama": "/api/chat"}


def _connection(user, server, api, **fields):
    base_url = server.url if api == "openai" else server.ollama_url
    fields.setdefault("api_key", KEY)
    return connection_create(user=user, name=f"scripted {api}", api=api, base_url=base_url, model="m", **fields)


def _header(request: dict, name: str) -> str | None:
    return next((v for k, v in request["headers"].items() if k.lower() == name.lower()), None)


def _fails(connection, messages=HELLO) -> LlmError:
    with pytest.raises(LlmError) as caught:
        complete(connection, messages, purpose="test")
    return caught.value


# ------------------------------------------------------------------------------------------------ answers


@BOTH_APIS
def test_think_block_is_stripped_and_recorded_as_reasoning(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", "<think>A greeting is wanted.</think>\n\nHello, Mira!")

    completion = complete(connection, HELLO, purpose="greeting")

    assert (completion.text, completion.reasoning) == ("Hello, Mira!", "A greeting is wanted.")
    call = Call.objects.get()
    assert call == completion.call
    assert (call.user, call.connection, call.purpose, call.model) == (user, connection, "greeting", "m")
    assert (call.status, call.attempts, call.error, call.template) == ("ok", 1, "", "")
    assert (call.response, call.reasoning) == ("Hello, Mira!", "A greeting is wanted.")
    # The server's usage figures, not an estimate: words of the prompt and of the raw answer.
    assert (call.prompt_tokens, call.completion_tokens, call.tokens_estimated) == (7, 6, False)
    [request] = llm_server.requests
    assert request["path"] == PATHS[api] and request["body"]["model"] == "m"
    assert request["body"]["messages"] == HELLO


@BOTH_APIS
def test_reasoning_field_is_kept_apart_from_the_answer(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply("Hello!", reasoning="Mira is a friend; be warm."))

    completion = complete(connection, HELLO, purpose="greeting")

    assert (completion.text, completion.reasoning) == ("Hello!", "Mira is a friend; be warm.")
    assert Call.objects.get().reasoning == "Mira is a friend; be warm."


@pytest.mark.django_db(transaction=True)  # inside the loop's context Django opens a connection of its own
def test_a_blocking_call_works_from_a_thread_whose_event_loop_is_running(user, llm_server, monkeypatch):
    """Sync code driven by an event loop (Playwright's sync API drives the browser tests so, with Django's async
    guard off) still gets its answer: asgiref's async_to_sync alone refuses to run there."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    connection = _connection(user, llm_server, "openai")
    llm_server.on("Say hello", "Hello from inside a loop.")

    async def driven():
        return complete(connection, HELLO, purpose="test")

    assert asyncio.run(driven()).text == "Hello from inside a loop."


def test_openai_request_carries_temperature_and_max_tokens(user, llm_server):
    complete(_connection(user, llm_server, "openai"), HELLO, purpose="test", max_tokens=32, temperature=0.7)
    body = llm_server.requests[0]["body"]
    assert (body["temperature"], body["max_tokens"]) == (0.7, 32)


def test_ollama_request_is_not_streamed_and_carries_options_and_context_window(user, llm_server):
    connection = _connection(user, llm_server, "ollama", context_window=4096)
    complete(connection, HELLO, purpose="test", max_tokens=32)
    body = llm_server.requests[0]["body"]
    assert (body["stream"], body["think"]) == (False, False)
    assert body["options"] == {"temperature": 0.2, "num_predict": 32, "num_ctx": 4096}


def test_without_a_context_window_ollama_is_told_the_size_prompts_are_built_for(user, llm_server):
    from apps.llm.profiles import connection_context_size

    connection = _connection(user, llm_server, "ollama")
    complete(connection, HELLO, purpose="test", max_tokens=32)
    assert llm_server.requests[0]["body"]["options"]["num_ctx"] == connection_context_size(connection)


@BOTH_APIS
def test_missing_usage_is_estimated_and_flagged(user, llm_server, api):
    llm_server.on("Say hello", Reply("Hello there, Mira, my old friend.", usage=False))

    call = complete(_connection(user, llm_server, api), HELLO, purpose="test").call

    assert call.tokens_estimated is True
    assert call.prompt_tokens == count_message_tokens(HELLO) > 0
    assert call.completion_tokens == count_tokens("Hello there, Mira, my old friend.") > 0


def test_prompt_template_ref_is_recorded(llm):
    prompt = prompt_get("llm", "connection_test")
    llm.server.on("Reply with OK", "OK")

    completion = complete_prompt(llm, prompt, purpose="connection_test")

    assert completion.text == "OK"
    assert Call.objects.get().template == "connection_test@v1"
    assert llm.server.requests[0]["body"]["messages"] == prompt.render()


# ----------------------------------------------------------------------------------------------- the key


@BOTH_APIS
def test_api_key_goes_only_into_the_authorization_header(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    complete(connection, HELLO, purpose="test")
    llm_server.on("Say hello", Reply(status=401))
    error = _fails(connection)

    assert [_header(r, "Authorization") for r in llm_server.requests] == [f"Bearer {KEY}"] * 2
    assert KEY not in str(llm_server.requests[0]["body"])
    assert KEY not in error.message
    for call in Call.objects.all():
        assert all(KEY not in str(getattr(call, f.attname)) for f in Call._meta.fields), call


def test_ollama_without_a_key_sends_no_authorization_header(user, llm_server):
    complete(_connection(user, llm_server, "ollama", api_key=""), HELLO, purpose="test")
    assert _header(llm_server.requests[0], "Authorization") is None


# ----------------------------------------------------------------------------------------- retries, errors


@BOTH_APIS
def test_429_twice_then_an_answer_is_one_call_of_three_attempts(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply("Hello!"))
    llm_server.on("Say hello", Reply(status=429, headers={"retry-after": "0"}), times=2)

    completion = complete(connection, HELLO, purpose="test")

    assert completion.text == "Hello!"
    call = Call.objects.get()
    assert (call.status, call.attempts, call.error) == ("ok", 3, "")
    assert len(llm_server.requests) == 3


@BOTH_APIS
def test_429_forever_fails_with_a_clear_message_after_every_attempt(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(status=429, headers={"retry-after": "0"}))

    error = _fails(connection)

    assert error.message == "rate limited (429) (after 4 attempts)"
    assert error.call == Call.objects.get()
    assert (error.call.status, error.call.attempts, error.call.error) == ("error", 4, error.message)
    assert error.call.tokens_estimated and error.call.prompt_tokens == count_message_tokens(HELLO)
    assert error.call.response == "" and len(llm_server.requests) == 4


def test_a_long_retry_after_is_capped(user, llm_server, settings):
    assert settings.LOREKEEPER_LLM["retry_after_max"] < 1
    connection = _connection(user, llm_server, "openai")
    llm_server.on("Say hello", Reply(status=429, headers={"retry-after": "30"}), times=1)
    started = time.monotonic()
    assert complete(connection, HELLO, purpose="test").call.attempts == 2
    assert time.monotonic() - started < 5


@BOTH_APIS
def test_server_error_is_retried(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(status=500), times=1)

    call = complete(connection, HELLO, purpose="test").call

    assert (call.status, call.attempts) == ("ok", 2)


@BOTH_APIS
def test_server_error_every_time_names_the_status(user, llm_server, api):
    llm_server.on("Say hello", Reply(status=503))
    error = _fails(_connection(user, llm_server, api))
    assert error.message == "server error 503 (after 4 attempts)"


@BOTH_APIS
def test_a_refused_request_is_not_retried(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(status=400))

    error = _fails(connection)

    assert error.message == "the server refused the request (400): Bad Request"
    assert (error.call.status, error.call.attempts) == ("error", 1)
    assert len(llm_server.requests) == 1


@BOTH_APIS
def test_a_timeout_fails_with_timed_out(user, llm_server, api, settings):
    settings.LOREKEEPER_LLM = {**settings.LOREKEEPER_LLM, "retries": 0}
    connection = connection_update(connection=_connection(user, llm_server, api), data={"timeout": 1})
    llm_server.on("Say hello", Reply("too late", delay=1.5))

    error = _fails(connection)

    assert error.message == "timed out after 1 s (after 1 attempt)"
    assert (error.call.status, error.call.error) == ("error", error.message)


def test_a_timeout_is_retried(user, llm_server):
    connection = connection_update(connection=_connection(user, llm_server, "openai"), data={"timeout": 1})
    llm_server.on("Say hello", Reply("too late", delay=1.5), times=1)

    call = complete(connection, HELLO, purpose="test").call

    assert (call.status, call.attempts, call.response) == ("ok", 2, "NONE")


@BOTH_APIS
def test_a_server_that_does_not_listen_fails_with_cannot_connect(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.stop()

    error = _fails(connection)

    assert error.message == f"cannot connect to {connection.base_url} (after 4 attempts)"
    assert error.call.attempts == 4
    # Nothing was spent: no estimated prompt counted against the day's limit for background work.
    assert (error.call.prompt_tokens, error.call.completion_tokens, error.call.tokens_estimated) == (0, 0, False)


@pytest.mark.parametrize(
    "api",
    [
        pytest.param(
            "openai",
        ),
        "ollama",
    ],
)
def test_a_malformed_body_is_an_llm_error(user, llm_server, api):
    connection = _connection(user, llm_server, api)
    llm_server.on("Say hello", Reply(raw="not json"))

    error = _fails(connection)

    assert error.message.startswith("unreadable answer")
    assert (error.call.status, error.call.attempts) == ("error", 1)


@pytest.mark.parametrize(
    ("api", "raw"),
    [
        ("openai", '{"choices": [{"index": 0}]}'),
        ("openai", '{"id": "x", "choices": []}'),
        ("ollama", '{"done": true}'),
        ("ollama", '["message"]'),
    ],
)
def test_json_without_an_answer_is_an_llm_error(user, llm_server, api, raw):
    llm_server.on("Say hello", Reply(raw=raw))
    error = _fails(_connection(user, llm_server, api))
    assert error.message in ("unreadable answer: no choices in it", "unreadable answer: not an Ollama chat response")
    assert error.call.status == "error"


# ---------------------------------------------------------------------------------------- private hosts


def test_a_call_to_a_private_host_is_refused_when_the_deployment_forbids_them(llm, settings):
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False

    error = _fails(llm)

    assert error.message == "This deployment does not call private or local network addresses."
    assert (error.call.status, error.call.error) == ("error", error.message)
    assert llm.server.requests == []


def test_a_redirect_from_the_provider_is_not_followed(llm):
    elsewhere = start_llm_server()
    try:
        target = f"{elsewhere.url}/chat/completions"
        llm.server.on("Say hello", Reply(status=307, headers={"location": target}))
        with contextlib.suppress(LlmError):
            complete(llm, HELLO, purpose="test")
        assert elsewhere.requests == []
        assert Call.objects.get().status == "error"
    finally:
        elsewhere.stop()


# ------------------------------------------------------------------------------------------------ prompts


def test_prompt_get_answers_the_newest_version_unless_one_is_pinned():
    versions = prompt_versions("llm")["connection_test"]
    newest = prompt_get("llm", "connection_test")
    assert newest.version == max(versions)
    assert prompt_get("llm", "connection_test", version=1) == Prompt(
        "connection_test", 1, "You are a connectivity check. Answer with the single word OK.", "Reply with OK."
    )
    assert prompt_get("llm", "connection_test", version=1).ref == "connection_test@v1"


def test_prompt_get_of_a_missing_prompt_or_version_is_a_lookup_error():
    with pytest.raises(LookupError, match="No prompt 'no_such_prompt'"):
        prompt_get("llm", "no_such_prompt")
    with pytest.raises(LookupError, match="No version 99 of prompt 'connection_test'"):
        prompt_get("llm", "connection_test", version=99)


def test_render_substitutes_placeholders_and_leaves_json_braces_alone():
    prompt = Prompt(
        "verdict",
        2,
        'Answer with JSON: {"verdict": "UPDATE" | "INDEPENDENT", "why": "..."}',
        "Old: $old\nNew: ${new}. Costs $$5.",
    )
    assert prompt.ref == "verdict@v2"
    assert prompt.render(old="Mira lives in Eastfold.", new="Mira moved to Westmarch", unused=1) == [
        {"role": "system", "content": 'Answer with JSON: {"verdict": "UPDATE" | "INDEPENDENT", "why": "..."}'},
        {"role": "user", "content": "Old: Mira lives in Eastfold.\nNew: Mira moved to Westmarch. Costs $5."},
    ]


def test_render_without_a_system_section_sends_only_the_user_message():
    assert Prompt("bare", 1, "", "Count to $n.").render(n=3) == [{"role": "user", "content": "Count to 3."}]


def test_render_with_a_missing_value_fails_loudly():
    with pytest.raises(KeyError, match="new"):
        Prompt("verdict", 1, "", "$old then $new").render(old="x")


# ------------------------------------------------------------------------------------------------- tokens


def test_count_tokens_is_zero_for_no_text_and_positive_for_any():
    assert count_tokens("") == 0
    assert count_tokens("a") >= 1
    assert count_tokens("Mira keeps the lantern lit.") > 0


def test_count_tokens_grows_with_the_text_and_errs_high():
    words = "the keeper of the lantern walks the cliff path every night".split()
    counts = [count_tokens(" ".join(words[:n])) for n in range(1, len(words) + 1)]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    # At least one token per four characters and per word, the usual BPE rates for English.
    text = " ".join(words)
    assert count_tokens(text) >= max(len(text) / 4, len(words))


def test_count_message_tokens_adds_a_per_message_overhead():
    messages = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": ""}]
    assert count_message_tokens(messages) == count_tokens("Hello") + 2 * PER_MESSAGE_OVERHEAD + 2
