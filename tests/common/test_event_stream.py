"""EventStreamResponse (apps/common/views.py): what its stream left open is ended when the answer is closed, sent or
not, and a failure to end it never fails the closing."""

from __future__ import annotations

import asyncio
import logging

import pytest

from apps.common.views import EventStreamResponse

# Closing an answer sends Django's request_finished, which tidies the database connections a test before left
# open in this process: allowed, or the test fails by where it happened to run.
pytestmark = pytest.mark.django_db


async def _events():
    yield b"data: one\n\n"
    yield b"data: two\n\n"


def _read(response: EventStreamResponse) -> list[bytes]:
    async def read():
        return [part async for part in response]

    return asyncio.run(read())


def test_closed_unsent_it_ends_what_the_stream_left_open():
    ended: list[str] = []
    response = EventStreamResponse(_events(), on_close=lambda: ended.append("closed"))
    assert response["Content-Type"] == "text/event-stream" and response["Cache-Control"] == "no-cache"
    assert ended == []
    response.close()
    assert ended == ["closed"]


def test_closed_once_sent_it_ends_it_too():
    ended: list[str] = []
    response = EventStreamResponse(_events(), on_close=lambda: ended.append("closed"))
    assert _read(response) == [b"data: one\n\n", b"data: two\n\n"]
    assert ended == []
    response.close()
    assert ended == ["closed"]


def test_a_failure_to_end_it_is_logged_and_the_answer_still_closes(caplog):
    def failing():
        raise RuntimeError("the database is gone")

    response = EventStreamResponse(_events(), on_close=failing)
    with caplog.at_level(logging.ERROR, logger="apps.common.views"):
        response.close()
    assert "closed stream left open failed" in caplog.text and "the database is gone" in caplog.text


def test_the_stream_given_is_closed_with_what_django_iterates():
    """Django's ASGI handler closes the iterator it took from the answer, not the generators within it: a stream
    its client left mid-way must be closed then, in the request's context, not when it is collected."""
    ended: list[str] = []

    async def stream():
        try:
            yield b"data: one\n\n"
            yield b"data: two\n\n"
        finally:
            ended.append("stream closed")

    response = EventStreamResponse(stream(), on_close=lambda: None)

    async def one_then_leave():
        parts = aiter(response)
        first = await anext(parts)
        await parts.aclose()  # as the handler's aclosing() does when the send fails
        return first

    assert asyncio.run(one_then_leave()) == b"data: one\n\n"
    assert ended == ["stream closed"]
