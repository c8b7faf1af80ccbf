"""Calling a model: one function for both APIs, with timeouts, retries with backoff, 429 handling, the think-block
stripper and a Call record of every request.

`complete()` never raises anything but LlmError, whose message is what a person is shown ("the model answered
429 four times", "timed out after 30 s"). API keys go only into the Authorization header: they are not part of
any message, record or log line.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from http import HTTPStatus

import httpx
import openai
from django.conf import settings

from apps.common.exceptions import ApplicationError
from apps.common.netguard import guarded_http_client, provider_url_check
from apps.common.secrets import secret_decrypt
from apps.llm.models import Call, Connection
from apps.llm.profiles import connection_context_size
from apps.llm.prompts import Prompt
from apps.llm.selectors import LIMIT_MESSAGE, is_background, limit_reached
from apps.llm.thinking import split_message
from apps.llm.tokens import count_message_tokens, count_tokens

log = logging.getLogger(__name__)
RECORD_LIMIT = 20000


class LlmError(Exception):
    def __init__(self, message: str, *, call: Call | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.call = call


class LimitReached(LlmError):
    """A background call refused before any request: the person's daily token limit is spent (not the model's
    fault: the work waits for midnight rather than counting a failed attempt)."""


class UnreadableAnswer(LlmError):
    """The model answered, but nothing of the answer could be used (its text stays on the Call record)."""


@dataclass
class Completion:
    text: str
    reasoning: str
    call: Call


@dataclass
class _Answer:
    message: dict
    prompt_tokens: int | None
    completion_tokens: int | None


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _config(name: str):
    return settings.LOREKEEPER_LLM[name]


def _retry_after(headers) -> float | None:
    if not headers:
        return None
    for key, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(key)
        if value:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


def _refused(status: int) -> LlmError:
    """What a person is told of a refusal: the status and its standard reason, never the body. The body could be
    any service's page, and echoing it would make the connection test a probe (nor is it logged: providers echo
    parts of the key in it)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "an unknown status"
    return LlmError(f"the server refused the request ({status}): {reason}")


def _call_openai(connection: Connection, messages: list[dict], options: dict, timeout: float) -> _Answer:
    client = openai.OpenAI(
        base_url=connection.base_url,
        api_key=secret_decrypt(connection.api_key_encrypted) or "unused",
        timeout=timeout,
        max_retries=0,  # ours below, the same for both APIs
        http_client=guarded_http_client(),  # the address policy at every connection, no redirects
    )
    try:
        answer = client.chat.completions.create(model=connection.model, messages=messages, **options)
    except openai.RateLimitError as exc:
        raise _Retryable("rate limited (429)", _retry_after(exc.response.headers)) from exc
    except openai.APITimeoutError as exc:
        raise _Retryable(f"timed out after {timeout:g} s") from exc
    except openai.APIConnectionError as exc:
        raise _Retryable(f"cannot connect to {connection.base_url}") from exc
    except openai.InternalServerError as exc:
        raise _Retryable(f"server error {exc.status_code}", _retry_after(exc.response.headers)) from exc
    except openai.APIStatusError as exc:
        raise _refused(exc.status_code) from exc
    except (openai.OpenAIError, ValueError) as exc:  # ValueError: a body that is not JSON
        raise LlmError("unreadable answer: not an OpenAI-compatible chat completion") from exc
    try:
        message = answer.choices[0].message.model_dump()
    except (AttributeError, IndexError, TypeError) as exc:
        raise LlmError("unreadable answer: no choices in it") from exc
    usage = answer.usage
    return _Answer(message, usage.prompt_tokens if usage else None, usage.completion_tokens if usage else None)


def _call_ollama(connection: Connection, messages: list[dict], options: dict, timeout: float) -> _Answer:
    body = {"model": connection.model, "messages": messages, "stream": False, "think": False}
    ollama_options = {"temperature": options.get("temperature", 0.2)}
    if options.get("max_tokens"):
        ollama_options["num_predict"] = options["max_tokens"]
    # Always the context size the callers size their prompts to: Ollama's own default is smaller, and it would cut
    # the start of a longer prompt without a word.
    ollama_options["num_ctx"] = connection_context_size(connection)
    body["options"] = ollama_options
    url = connection.base_url.rstrip("/") + "/api/chat"
    headers = {}
    key = secret_decrypt(connection.api_key_encrypted)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        response = guarded_http_client().post(url, json=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException as exc:
        raise _Retryable(f"timed out after {timeout:g} s") from exc
    except httpx.HTTPError as exc:
        raise _Retryable(f"cannot connect to {connection.base_url}") from exc
    if response.status_code == 429:
        raise _Retryable("rate limited (429)", _retry_after(response.headers))
    if response.status_code >= 500:
        raise _Retryable(f"server error {response.status_code}", _retry_after(response.headers))
    if response.status_code >= 400:
        raise _refused(response.status_code)
    try:
        data = response.json()
        message = data["message"]
        if not isinstance(message, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError) as exc:
        raise LlmError("unreadable answer: not an Ollama chat response") from exc
    return _Answer(message, data.get("prompt_eval_count"), data.get("eval_count"))


_APIS = {Connection.Api.OPENAI: _call_openai, Connection.Api.OLLAMA: _call_ollama}


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


def _backoff(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, _config("retry_after_max"))
    base = _config("backoff") * (2**attempt)
    return min(base, _config("backoff_max")) * random.uniform(0.5, 1.0)


def complete(
    connection: Connection,
    messages: list[dict],
    *,
    purpose: str,
    prompt: Prompt | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.2,
    timeout: float | None = None,
    retries: int | None = None,
) -> Completion:
    """The model's answer (think blocks and reasoning fields removed) to `messages`, recorded as a Call.
    `timeout`/`retries` override the connection's and the settings' (a person waiting gets one short try).
    Background work past the person's daily token limit is refused before any request."""
    if is_background(purpose) and limit_reached(user_id=connection.user_id):
        raise LimitReached(LIMIT_MESSAGE)
    started = time.monotonic()
    call = Call(
        user_id=connection.user_id,
        connection=connection,
        purpose=purpose,
        template=prompt.ref if prompt else "",
        model=connection.model,
    )
    options: dict = {"temperature": temperature}
    if max_tokens:
        options["max_tokens"] = max_tokens
    timeout = min(timeout, connection.timeout or timeout) if timeout else connection.timeout or _config("timeout")
    attempts = 1 + max(0, int(_config("retries") if retries is None else retries))
    answer: _Answer | None = None
    error = ""
    try:
        provider_url_check(connection.base_url)
        for attempt in range(attempts):
            call.attempts = attempt + 1
            try:
                answer = _APIS[connection.api](connection, messages, options, timeout)
                break
            except _Retryable as exc:
                error = f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})"
                if attempt + 1 < attempts:
                    time.sleep(_backoff(attempt, exc.retry_after))
    except ApplicationError as exc:
        error = exc.message
    except LlmError as exc:
        error = exc.message
    call.latency_ms = int((time.monotonic() - started) * 1000)
    if answer is None:
        call.status, call.error = Call.Status.ERROR, error
        call.prompt_tokens, call.tokens_estimated = count_message_tokens(messages), True
        call.save()
        log.warning("llm call %s (%s) failed: %s", call.pk, purpose, error)
        raise LlmError(error, call=call)
    text, reasoning = split_message(answer.message)
    call.status = Call.Status.OK
    call.response, call.reasoning = text[:RECORD_LIMIT], reasoning[:RECORD_LIMIT]
    call.tokens_estimated = answer.prompt_tokens is None or answer.completion_tokens is None
    call.prompt_tokens = answer.prompt_tokens if answer.prompt_tokens is not None else count_message_tokens(messages)
    call.completion_tokens = (
        answer.completion_tokens if answer.completion_tokens is not None else count_tokens(text + reasoning)
    )
    call.save()
    return Completion(text, reasoning, call)


def complete_prompt(
    connection: Connection,
    prompt: Prompt,
    *,
    purpose: str,
    max_tokens: int | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    **values,
) -> Completion:
    return complete(
        connection,
        prompt.render(**values),
        purpose=purpose,
        prompt=prompt,
        max_tokens=max_tokens,
        timeout=timeout,
        retries=retries,
    )
