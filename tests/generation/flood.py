"""A model that streams as fast as it can, and a client that reads a stream as fast as it can, each run in a process
of its own (multiprocessing, spawned: no Django in them), so that neither is slowed by the test's own threads."""

from __future__ import annotations

import json
import socket
import threading
import time


def serve_flood(port, sent, stop, seconds: float) -> None:
    """An OpenAI-compatible model on 127.0.0.1 (its port written to `port`) whose every stream sends tokens as fast
    as the socket takes them for `seconds`, then ends; `sent` counts the bytes of events, all streams."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port.value = listener.getsockname()[1]
    event = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": " tok"}}]}
    data = f"data: {json.dumps(event)}\n\n".encode() * 200
    chunk = b"%x\r\n%s\r\n" % (len(data), data)

    def one(conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            head, body = head.split(b"\r\n\r\n", 1)
            lines = head.lower().split(b"\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in lines if line.startswith(b"content-length"))
            while len(body) < length:
                body += conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n")
                conn.sendall(b"Connection: close\r\n\r\n")
                until = time.monotonic() + seconds
                while time.monotonic() < until and not stop.is_set():
                    conn.sendall(chunk)
                    with sent.get_lock():
                        sent.value += len(data)
                done = b"data: [DONE]\n\n"
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
            except OSError:  # the client went away
                pass

    with listener:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            threading.Thread(target=one, args=(conn,), daemon=True).start()


def read_streams(url: str, path: str, token: str, body: dict, seconds: float, received) -> None:
    """POST `body` to `path` and read the answer to its end as fast as it comes, counting its bytes in `received`;
    again as soon as it ended, for `seconds` (a bound on the reply's length ends each one: a flooder asks again)."""
    data = json.dumps(body).encode()
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode() + data
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(request)
                while chunk := sock.recv(2**20):
                    received.value += len(chunk)
        except OSError:
            time.sleep(0.1)
