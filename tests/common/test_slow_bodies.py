"""Request bodies that arrive too slowly, under the production server (apps/common/slow_bodies.py): a client that
trickles its body, or stops sending it, is answered 408 and disconnected at the bound, not held open."""

from __future__ import annotations

import socket
import time

import pytest

from tests.servers import gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # .ci/run runs it after make test

READ_SECONDS, SECONDS = 2, 5  # the bounds the server is given here (the defaults are 15 and 60)


def _post_slowly(url: str, *, every: float, length: int = 1000) -> tuple[bytes, int, float]:
    """POST a JSON body of `length` bytes one byte every `every` seconds; return what the server answered, the
    bytes sent before it did, and the seconds it took."""
    host, port = url.removeprefix("http://").split(":")
    began = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST /api/v1/chats/ HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        sent = 0
        sock.setblocking(False)
        answer = b""
        while sent < length and time.monotonic() - began < 30:
            try:
                answer += sock.recv(65536)
                break  # answered (or closed) before the body was whole
            except BlockingIOError:
                pass
            try:
                sock.send(b" ")
                sent += 1
            except OSError:
                break
            time.sleep(every)
        sock.settimeout(10)
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    return answer, sent, time.monotonic() - began


@pytest.fixture
def server(broker):
    bounds = {"LOREKEEPER_BODY_READ_SECONDS": str(READ_SECONDS), "LOREKEEPER_BODY_SECONDS": str(SECONDS)}
    with gunicorn(broker=broker, workers=1, asgi=True, **bounds) as url:
        yield url


def test_a_body_trickled_a_byte_a_second_is_cut_off_with_408_at_the_whole_bodys_bound(server):
    answer, sent, took = _post_slowly(server, every=1.0)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert b"arrived too slowly" in answer and b"connection: close" in answer.lower()
    assert sent < 1000 and took < 3 * SECONDS  # cut off at the bound, long before the body's end


def test_a_body_that_stops_coming_is_cut_off_with_408_at_the_reads_bound(server):
    answer, sent, took = _post_slowly(server, every=4 * READ_SECONDS)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert sent <= 2 and took < 3 * SECONDS
