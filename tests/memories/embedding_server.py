"""A scripted embedding server over real HTTP (OpenAI-compatible /v1/embeddings and Ollama /api/embed).

The test decides the vectors: `server.vectors[text] = [...]` (any dimension, the same for every text of a run);
other texts get a deterministic vector hashed from their words and the model name, so texts sharing words lie
close, and the same text under two models does not. Every request is recorded in `server.requests`, so a test can
tell whether the cache spared a call and how texts were batched.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIM = 16
_WORD = re.compile(r"\w+")


def hashed_vector(text: str, *, model: str, dim: int) -> list[float]:
    vector = [0.0] * dim
    for word in _WORD.findall(text.lower()) or [text]:
        digest = hashlib.sha256(f"{model}|{word}".encode()).digest()
        vector[digest[0] % dim] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector] if any(vector) else [1.0] + [0.0] * (dim - 1)


@dataclass
class Request:
    path: str
    model: str
    texts: list[str]
    authorization: str
    body: dict


@dataclass
class EmbeddingServer:
    dim: int = DIM
    vectors: dict[str, list[float]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    fail_status: int | None = None
    drop_last: bool = False
    delay: float = 0.0  # seconds each answer waits: a slow model, for runs that overlap
    in_flight: int = 0
    most_in_flight: int = 0  # the most requests answered at once
    port: int = 0
    httpd: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def vector_for(self, text: str, model: str) -> list[float]:
        if text in self.vectors:
            return self.vectors[text]
        return hashed_vector(text, model=model, dim=self.dim)

    def embedded_texts(self) -> list[str]:
        return [text for request in self.requests for text in request.texts]

    def forget(self) -> None:
        with self._lock:
            self.requests.clear()

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def handler_for(server: EmbeddingServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest's output clean
            pass

        def _answer(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else list(texts or [])
            with server._lock:
                server.requests.append(
                    Request(self.path, body.get("model", ""), texts, self.headers.get("Authorization", ""), body)
                )
            with server._lock:
                server.in_flight += 1
                server.most_in_flight = max(server.most_in_flight, server.in_flight)
            time.sleep(server.delay)
            with server._lock:
                server.in_flight -= 1
            if server.fail_status:
                # retry-after-ms keeps the OpenAI SDK's retries of a failing server quick.
                self._answer(server.fail_status, {"error": {"message": "scripted failure"}}, {"retry-after-ms": "1"})
                return
            model = body.get("model", "")
            vectors = [server.vector_for(text, model) for text in texts]
            if server.drop_last:
                vectors = vectors[:-1]
            if self.path == "/v1/embeddings":
                as_base64 = body.get("encoding_format") == "base64"
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v,
                    }
                    for i, v in enumerate(vectors)
                ]
                # Answered out of order on purpose: clients must sort by `index`.
                self._answer(
                    200,
                    {
                        "object": "list",
                        "data": list(reversed(data)),
                        "model": model,
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    },
                )
            elif self.path == "/api/embed":
                self._answer(200, {"model": model, "embeddings": vectors})
            else:
                self._answer(404, {"error": "no such path"})

    return Handler


def start_server(dim: int = DIM) -> EmbeddingServer:
    state = EmbeddingServer(dim=dim)
    state.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    state.httpd.daemon_threads = True
    state.port = state.httpd.server_address[1]
    threading.Thread(target=state.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return state
