"""Calling a model for a whole answer, from blocking code (Celery tasks, a request's connection test): `complete()`
runs the wire of apps/llm/transport/ to the end, the same requests, retries, error messages and Call record as a
streamed reply's (apps/llm/streaming.py), with the think-block stripper.

`complete()` never raises anything but LlmError, whose message is what a person is shown ("rate limited (429)
(after 4 attempts)", "timed out after 30 s (after 1 attempt)"). API keys go only into the Authorization header:
they are not part of any message, record or log line.

It runs the async transport with asgiref's `async_to_sync`: in a worker or a management command on an event loop
of its own, in a sync view under ASGI on the server's loop (the thread waits). Called from a thread whose own event
loop is running (sync code driven by one, as Playwright's sync API drives a test), it runs on a loop in a thread of
its own, and this thread waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.conf import settings

from apps.common.exceptions import ApplicationError
from apps.common.netguard import provider_url_check
from apps.llm.models import Call, Connection
from apps.llm.prompts import Prompt
from apps.llm.sampler import sampler_request
from apps.llm.selectors import LIMIT_MESSAGE, is_background, limit_reached
from apps.llm.transport import LlmError, Record, answer_whole, call_save, request_for

log = logging.getLogger(__name__)


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


def _options(connection: Connection, *, max_tokens: int | None, temperature: float) -> dict:
    options = sampler_request(connection.api, max_tokens=max_tokens, sampler={"temperature": temperature})
    if connection.api == Connection.Api.OLLAMA:
        options["think"] = False  # the answer only: what background work reads
    return options


def _run_to_end(function, *args, **kwargs):
    """`await function(*args, **kwargs)` from blocking code, wherever it is called (module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop running in this thread: the usual case
        return async_to_sync(function)(*args, **kwargs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, function(*args, **kwargs)).result()


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
    config = settings.LOREKEEPER_LLM
    started = time.monotonic()
    timeout = min(timeout, connection.timeout or timeout) if timeout else connection.timeout or config["timeout"]
    retries = int(config["retries"] if retries is None else retries)
    record = Record()
    failure: LlmError | None = None
    try:
        provider_url_check(connection.base_url)
        options = _options(connection, max_tokens=max_tokens, temperature=temperature)
        request = request_for(connection, messages, options, stream=False)
        _run_to_end(answer_whole, connection, request, timeout=timeout, retries=retries, record=record)
    except ApplicationError as exc:  # the URL, refused by the address policy
        failure = LlmError(exc.message)
    except LlmError as exc:
        failure = exc
    record.error = failure.message if failure else ""
    call = call_save(
        connection=connection,
        user_id=connection.user_id,
        purpose=purpose,
        template=prompt.ref if prompt else "",
        messages=messages,
        record=record,
        status=Call.Status.ERROR if failure else Call.Status.OK,
        ms=int((time.monotonic() - started) * 1000),
    )
    if failure is not None:
        log.warning("llm call %s (%s) failed: %s", call.pk, purpose, failure.message)
        failure.call = call
        raise failure
    text, reasoning = record.answer()
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
