"""A scripted model over real HTTP: OpenAI-compatible /v1/chat/completions and Ollama's /api/chat.

A test scripts answers by prompt: `server.on("UPDATE or INDEPENDENT", "UPDATE")` answers every request whose
messages contain that text; `times=1` makes a rule apply once (then the next matching rule or the default answers),
so "429 twice, then an answer" is two rules. A reply may carry a think block in the text, a reasoning field, an HTTP
status with headers, a delay (to provoke timeouts), or a raw body (malformed JSON). `server.requests` records every
request's path, headers and body.
"""

from __future__ import annotations

import json
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
            with server._lock:
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body, "prompt": prompt}
                )
            reply = server._reply_for(prompt)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.raw is not None or reply.status != 200:
                error = json.dumps({"error": {"message": "scripted failure", "type": "scripted"}})
                self._send(reply.status, reply.raw if reply.raw is not None else error, reply.headers)
                return
            usage_in, usage_out = len(prompt.split()), len(reply.content.split())
            if self.path == "/v1/chat/completions":
                message = {"role": "assistant", "content": reply.content}
                if reply.reasoning is not None:
                    message["reasoning_content"] = reply.reasoning
                answer = {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
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
                answer = {"model": body.get("model", ""), "message": message, "done": True}
                if reply.usage:
                    answer |= {"prompt_eval_count": usage_in, "eval_count": usage_out}
            else:
                self._send(404, json.dumps({"error": "no such path"}), {})
                return
            self._send(200, json.dumps(answer), reply.headers)

    return Handler


def start_llm_server() -> LlmServer:
    state = LlmServer()
    state.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.httpd.daemon_threads = True
    state.port = state.httpd.server_address[1]
    threading.Thread(target=state.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return state
