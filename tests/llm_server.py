"""A scripted model over real HTTP: OpenAI-compatible /v1/chat/completions and Ollama's /api/chat.

A test scripts answers by prompt: `server.on("UPDATE or INDEPENDENT", "UPDATE")` answers every request whose
messages contain that text; `times=1` makes a rule apply once (then the next matching rule or the default answers),
so "429 twice, then an answer" is two rules. A reply may carry a think block in the text, a reasoning field, an HTTP
status with headers, a delay (to provoke timeouts), or a raw body (malformed JSON). `server.requests` records every
request's path, headers and body.

Streaming as the real servers do it: an OpenAI-compatible request with `"stream": true` gets server-sent events
(`data: {chat.completion.chunk}` … `data: [DONE]`), an Ollama /api/chat request with `stream` true or absent (Ollama's
default) NDJSON lines ending in one with `done: true`; the content goes out in word-sized chunks, over HTTP/1.1
chunked encoding, so a cut is visible to the client. `tokens_per_second` paces the chunks, `fail_after` cuts the
connection after that many content chunks. A request whose client went away before the end is marked
`request["client_gone"] = True`.

`keep_alive=True` answers as servers do that keep a connection open for the next request (HTTP/1.1, no
`Connection: close`); each request records the client's address (`request["peer"]`: one per TCP connection), and a
reply with `drop=True` closes the connection without answering, as a server closing an idle connection just as a
request arrives on it; one with `unasked` sends a second whole answer on the connection, unasked, once the first is
read, as a hostile server would.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    content: str = ""
    reasoning: str | None = None  # put in the API's reasoning field
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: str | None = None  # a body sent as is (malformed output)
    usage: bool = True
    tokens_per_second: float | None = None  # a stream's pace between chunks
    fail_after: int | None = None  # a stream is cut after this many content chunks
    drop: bool = False  # the connection is closed without an answer
    unasked: str | None = None  # a whole second answer sent 0.3 s after this one, to no request (a hostile server)
    finish: str = "stop"  # how the model says it ended: "length" at its max_tokens


@dataclass
class Rule:
    match: Callable[[str], bool]
    reply: Reply | Callable[[str], Reply]
    times: int | None = None


@dataclass
class LlmServer:
    rules: list[Rule] = field(default_factory=list)
    default: Reply = field(default_factory=lambda: Reply("NONE"))
    requests: list[dict] = field(default_factory=list)
    port: int = 0
    keep_alive: bool = False
    httpd: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """Base URL for an OpenAI-compatible connection."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def ollama_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def on(self, text: str | Callable[[str], bool], reply: str | Reply | Callable[[str], Reply], *, times=None):
        """Answer prompts containing `text` (or for which `text(prompt)` is true) with `reply`. Later rules are
        tried first, so a test can override an earlier, broader script."""
        match = text if callable(text) else (lambda prompt, needle=text: needle in prompt)
        self.rules.insert(0, Rule(match, Reply(reply) if isinstance(reply, str) else reply, times))

    def peers(self) -> list[tuple[str, int]]:
        """The client address of each request, in order: as many distinct ones as TCP connections were used."""
        return [r["peer"] for r in self.requests]

    def prompts(self, containing: str = "") -> list[str]:
        return [r["prompt"] for r in self.requests if containing in r["prompt"]]

    def _reply_for(self, prompt: str) -> Reply:
        with self._lock:
            for rule in self.rules:
                if rule.times == 0 or not rule.match(prompt):
                    continue
                if rule.times is not None:
                    rule.times -= 1
                return rule.reply(prompt) if callable(rule.reply) else rule.reply
            return self.default

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


def _handler(server: LlmServer):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, body: str, headers: dict[str, str]) -> None:
            data = body.encode()
            try:
                self.send_response(status)
                if "Content-Type" not in headers:  # a raw stream sets its own
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            messages = body.get("messages") or []
            prompt = "\n".join(str(m.get("content", "")) for m in messages)
            request = {"path": self.path, "headers": dict(self.headers), "body": body, "prompt": prompt,
                       "peer": self.client_address}  # fmt: skip
            with server._lock:
                server.requests.append(request)
            reply = server._reply_for(prompt)
            if reply.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.delay:
                time.sleep(reply.delay)
            if reply.raw is not None or reply.status != 200:
                error = json.dumps({"error": {"message": "scripted failure", "type": "scripted"}})
                self._send(reply.status, reply.raw if reply.raw is not None else error, reply.headers)
                return
            usage_in, usage_out = len(prompt.split()), len(reply.content.split())
            streaming = body.get("stream", self.path == "/api/chat")  # Ollama streams unless told not to
            if streaming and self.path in ("/v1/chat/completions", "/api/chat"):
                _stream(self, request, reply, (usage_in, usage_out))
                return
            if self.path == "/v1/chat/completions":
                message = {"role": "assistant", "content": reply.content}
                if reply.reasoning is not None:
                    message["reasoning_content"] = reply.reasoning
                answer = {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
                }
                if reply.usage:
                    answer["usage"] = {
                        "prompt_tokens": usage_in,
                        "completion_tokens": usage_out,
                        "total_tokens": usage_in + usage_out,
                    }
            elif self.path == "/api/chat":
                message = {"role": "assistant", "content": reply.content}
                if reply.reasoning is not None:
                    message["thinking"] = reply.reasoning
                answer = {
                    "model": body.get("model", ""),
                    "message": message,
                    "done": True,
                    "done_reason": reply.finish,
                }
                if reply.usage:
                    answer |= {"prompt_eval_count": usage_in, "eval_count": usage_out}
            else:
                self._send(404, json.dumps({"error": "no such path"}), {})
                return
            self._send(200, json.dumps(answer), reply.headers)

    return Handler


def _pieces(text: str) -> list[str]:
    """Word-sized chunks that join back to `text` exactly (each word with the space before it)."""
    return re.findall(r"\s*\S+|\s+$", text)


def _openai_event(request: dict, delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request["body"].get("model", ""),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _ollama_line(request: dict, message: dict, **fields) -> bytes:
    line = {"model": request["body"].get("model", ""), "message": {"role": "assistant", **message}, "done": False}
    return (json.dumps(line | fields) + "\n").encode()


def _stream(handler: BaseHTTPRequestHandler, request: dict, reply: Reply, usage: tuple[int, int]) -> None:
    """The reply as a stream, in HTTP/1.1 chunks (so that a cut, a close without the last chunk, is an error)."""
    openai = request["path"] == "/v1/chat/completions"
    events: list[bytes] = []
    if openai:
        events.append(_openai_event(request, {"role": "assistant", "content": ""}))
        if reply.reasoning is not None:
            events.append(_openai_event(request, {"reasoning_content": reply.reasoning}))
        events += [_openai_event(request, {"content": piece}) for piece in _pieces(reply.content)]
        totals = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
        events.append(_openai_event(request, {}, reply.finish, totals if reply.usage else None))
        events.append(b"data: [DONE]\n\n")
    else:
        if reply.reasoning is not None:
            events.append(_ollama_line(request, {"content": "", "thinking": reply.reasoning}))
        events += [_ollama_line(request, {"content": piece}) for piece in _pieces(reply.content)]
        counts = {"prompt_eval_count": usage[0], "eval_count": usage[1]} if reply.usage else {}
        events.append(_ollama_line(request, {"content": ""}, done=True, done_reason=reply.finish, **counts))
    first_content = 1 + (reply.reasoning is not None) if openai else int(reply.reasoning is not None)
    pause = 1 / reply.tokens_per_second if reply.tokens_per_second else 0.0
    handler.protocol_version = "HTTP/1.1"
    try:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream" if openai else "application/x-ndjson")
        handler.send_header("Transfer-Encoding", "chunked")
        if not handler.server.keep_alive:
            handler.send_header("Connection", "close")
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        for index, event in enumerate(events):
            if reply.fail_after is not None and index - first_content >= reply.fail_after:
                handler.wfile.flush()
                handler.connection.shutdown(socket.SHUT_RDWR)  # cut: no last chunk
                return
            if pause and index:
                time.sleep(pause)
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
        if reply.unasked is not None:
            time.sleep(0.3)
            answer = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": reply.unasked},
                                              "finish_reason": "stop"}]}).encode()  # fmt: skip
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(answer)}\r\n\r\n"
            handler.wfile.write(head.encode() + answer)
            handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):  # the client went away: a person pressed Stop
        request["client_gone"] = True


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # a kept connection its client closed: not an error
            return
        super().handle_error(request, client_address)


def start_llm_server(*, keep_alive: bool = False) -> LlmServer:
    state = LlmServer(keep_alive=keep_alive)
    handler = _handler(state)
    if keep_alive:
        handler.protocol_version = "HTTP/1.1"
    state.httpd = _Server(("127.0.0.1", 0), handler)
    state.httpd.keep_alive = keep_alive
    state.httpd.daemon_threads = True
    state.port = state.httpd.server_address[1]
    threading.Thread(target=state.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return state
