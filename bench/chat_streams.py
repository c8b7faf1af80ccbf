"""The parts of bench/chat.py that run in processes of their own, so that neither weighs on the timing of the
people's requests in the bench's own process: the scripted model (an OpenAI-compatible server), and the stream clients
(one asyncio event loop, one task per stream, each asking for a reply again as soon as the last one ended). Both
run at a lower priority (`NICE`) than the server they load.

Both are started with multiprocessing's "spawn" and talk to the bench through shared counters and a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import ssl
import time
from urllib.parse import urlsplit

# What a prompt's last marker asks the scripted model for: a reply of 10-20 s (--reply-seconds), one that outlasts
# the measured run, or a short one that starts at once.
LONG, HELD, QUICK = "[a long reply, please]", "[a reply that outlasts the run, please]", "[a quick reply, please]"
# The scripted model and the stream clients give way to the server they load: they share its cores (bench/load.py
# runs its Celery workers the same way). A model starved of CPU would show as fewer deltas than it should send.
NICE = 10
# Shared counters (multiprocessing.Array("q")): streams that received a delta and have not ended, deltas received,
# replies ended with `done`, ended otherwise (error/conflict event, refused, broken), requests sent.
FLOWING, DELTAS, DONE, FAILED, SENT = range(5)
WORDS = "the tide turned grey over the harbour while Mira counted the ledgers and listened for the bell".split()


# ---------------------------------------------------------------------------------------------- the scripted model
def serve_model(
    port, stop, tokens_per_second: float, seconds: tuple[float, float], held: float, certificate=None
) -> None:
    """An OpenAI-compatible chat server on one event loop. It answers a prompt whose last marker asks for a long
    reply with `seconds` (a range) of words at `tokens_per_second`, one that asks for a held reply with `held`
    seconds of them, any other with a short reply that starts at once; streamed as a real server streams, a chunk a
    word, from one event loop rather than tests/llm_server.py's thread a request, and keeping the connection open
    for the client's next request, as real servers do. Its CPU (about 90 µs a word) is mostly the kernel's: on
    loopback, a write delivers the bytes into the server's socket, counted here. `certificate`: (certificate file,
    key file) to serve over TLS."""
    os.nice(NICE)
    rng = random.Random(7)

    def words(prompt: str) -> tuple[list[str], float]:
        marker = max((prompt.rfind(marker), marker) for marker in (LONG, HELD, QUICK))[1]
        if marker == QUICK:
            return "Mira looks up from the ledger and nods.".split(), 0.0
        count = int((rng.uniform(*seconds) if marker == LONG else held) * tokens_per_second)
        return [WORDS[i % len(WORDS)] for i in range(count)], 1 / tokens_per_second

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # one request after another, until the client closes the connection
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
                body = json.loads(await reader.readexactly(length))
                pieces, pause = words("\n".join(str(m.get("content")) for m in body["messages"]))
                pieces = [piece if n == 0 else " " + piece for n, piece in enumerate(pieces)]
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                             b"\r\n")  # fmt: skip
                loop = asyncio.get_running_loop()
                begun = loop.time()
                for n, piece in enumerate(pieces):
                    if pause:
                        await asyncio.sleep(begun + n * pause - loop.time())  # on time, however long each write took
                    if writer.is_closing():  # the stream was stopped
                        return
                    writer.write(_chunk({"choices": [{"index": 0, "delta": {"content": piece}}]}))
                usage = {"prompt_tokens": length // 4, "completion_tokens": len(pieces)}
                writer.write(_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}))
                writer.write(_chunk("[DONE]") + b"0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass  # the stream was stopped, the client closed the connection, or the bench is ending
        finally:
            writer.close()

    tls = None
    if certificate is not None:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(*certificate)

    async def serve() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=1024, ssl=tls)
        port.value = server.sockets[0].getsockname()[1]
        while not stop.is_set():
            await asyncio.sleep(0.5)
        server.close()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


def serve_distance(port, stop, target: int, rtt: float) -> None:
    """A TCP relay to 127.0.0.1:`target` that holds each read `rtt`/2 seconds in each direction, in order: the
    scripted model as far away as a model reached over a network. A new connection's first bytes wait one round
    trip more (its TCP handshake, which the kernel here completes at once): a call that opens a connection pays
    two round trips before its request is sent, three over TLS, as it would."""

    async def relay(reader, writer, delay: float, first_extra: float) -> None:
        loop = asyncio.get_running_loop()
        held: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await held.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if data is None:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        delivering = asyncio.create_task(deliver())
        extra = first_extra
        try:
            while data := await reader.read(65536):
                held.put_nowait((loop.time() + delay + extra, data))
                extra = 0.0
        except ConnectionError:
            pass
        held.put_nowait((loop.time() + delay, None))
        with contextlib.suppress(ConnectionError):
            await delivering

    async def connect(reader, writer) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target)
            await asyncio.gather(
                relay(reader, upstream_writer, rtt / 2, rtt), relay(upstream_reader, writer, rtt / 2, 0.0),
                return_exceptions=True,
            )  # fmt: skip
        except (OSError, asyncio.CancelledError):  # the model is gone, or the bench is ending
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(connect, "127.0.0.1", 0, backlog=1024)
        port.value = server.sockets[0].getsockname()[1]
        while not stop.is_set():
            await asyncio.sleep(0.5)
        server.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


def _chunk(event) -> bytes:
    data = b"data: " + (event.encode() if isinstance(event, str) else json.dumps(event).encode()) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


# ---------------------------------------------------------------------------------------------- the stream clients
def run_streams(base_url: str, accounts: list[dict], marker: str, ramp: float, pause, stop, counters, results) -> None:
    """One event loop, one task per account, until `stop` is set; then every open stream is closed (the server
    stores what arrived as stopped) and a summary goes on `results`. `pause`: the seconds (low, high) a person
    takes to read a reply and write the next message, before asking again; (0, 0) asks again at once."""
    os.nice(NICE)
    try:
        results.put(asyncio.run(_streams(base_url, accounts, marker, ramp, pause, stop, counters)))
    except KeyboardInterrupt:
        pass


async def _streams(base_url: str, accounts: list[dict], marker: str, ramp: float, pause, stop, counters) -> dict:
    summary: dict = {"to_context": [], "errors": {}}
    address = urlsplit(base_url)
    tasks = [
        asyncio.create_task(_one(address, account, marker, n * ramp / len(accounts), pause, counters, summary))
        for n, account in enumerate(accounts)
    ]
    while not stop.is_set():
        await asyncio.sleep(0.2)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return summary


def _request(address, account: dict, marker: str, turn: int) -> bytes:
    """HTTP/1.1 by hand: an HTTP client library would cost this process more CPU than the server's own work for a
    delta, on the machine the server shares with it."""
    body = json.dumps({"message": f"Tell me about the harbour, turn {turn}. {marker}", "mode": "new", "stream": True})
    return (
        f"POST /api/v1/chats/{account['chat']}/generate HTTP/1.1\r\nHost: {address.netloc}\r\n"
        f"Authorization: Bearer {account['token']}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


async def _one(address, account: dict, marker: str, delay: float, pause, counters, summary: dict) -> None:
    await asyncio.sleep(delay)
    rng = random.Random(account["chat"])
    turn = 0
    while True:
        turn += 1
        counters[SENT] += 1
        flowing, outcome, writer = False, "broken", None
        started = time.perf_counter()
        try:
            reader, writer = await asyncio.open_connection(address.hostname, address.port)
            writer.write(_request(address, account, marker, turn))
            status = await reader.readline()
            if b" 200 " not in status:
                outcome = f"HTTP {status.decode(errors='replace').strip()}: {(await reader.read(2000))[-200:]!r}"
            else:
                partial = b""
                while chunk := await reader.read(65536):
                    # uvicorn writes each event in a chunk of its own: its lines arrive whole
                    *lines, partial = (partial + chunk).split(b"\n")
                    for line in lines:
                        if not line.startswith(b"event: "):
                            continue
                        event = line[7:].strip()
                        if event == b"context":
                            summary["to_context"].append(time.perf_counter() - started)
                        elif event == b"delta":
                            counters[DELTAS] += 1
                            if not flowing:
                                flowing = True
                                counters[FLOWING] += 1
                        elif event in (b"done", b"error", b"conflict"):
                            outcome = event.decode()
        except OSError as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if flowing:
                counters[FLOWING] -= 1
            if writer is not None:
                writer.close()  # cancelled (the run ended): the server stores what arrived as stopped
        if outcome == "done":
            counters[DONE] += 1
            await asyncio.sleep(rng.uniform(*pause))  # the person reads the reply and writes the next message
            continue
        counters[FAILED] += 1
        kind = outcome.split(":")[0]
        summary["errors"].setdefault(kind, [0, outcome])[0] += 1
        await asyncio.sleep(1)  # as a client would before asking again
