"""EventStreamResponse (apps/common/views.py): what a stream opened ends when its answer is closed unsent, once,
and a failure to end it never fails the closing."""

from __future__ import annotations

import asyncio
import logging

from apps.common.views import EventStreamResponse


async def _events():
    yield b"data: one\n\n"
    yield b"data: two\n\n"


def _read(response: EventStreamResponse) -> list[bytes]:
    async def read():
        return [part async for part in response]

    return asyncio.run(read())


def test_closed_unsent_it_ends_what_the_stream_opened():
    ended: list[str] = []
    response = EventStreamResponse(_events(), unsent=lambda: ended.append("unsent"))
    assert response["Content-Type"] == "text/event-stream" and response["Cache-Control"] == "no-cache"
    response.close()
    assert ended == ["unsent"]


def test_closed_once_sent_it_leaves_the_stream_to_end_itself():
    ended: list[str] = []
    response = EventStreamResponse(_events(), unsent=lambda: ended.append("unsent"))
    assert _read(response) == [b"data: one\n\n", b"data: two\n\n"]
    response.close()
    assert ended == []


def test_a_failure_to_end_it_is_logged_and_the_answer_still_closes(caplog):
    def failing():
        raise RuntimeError("the database is gone")

    response = EventStreamResponse(_events(), unsent=failing)
    with caplog.at_level(logging.ERROR, logger="apps.common.views"):
        response.close()
    assert "never sent failed" in caplog.text and "the database is gone" in caplog.text
