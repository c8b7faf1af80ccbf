"""The parts of bench/chat.py that run in processes of their own, so that neither weighs on the timing of the
people's requests in the bench's own process: the scripted model (tests/llm_server.py), and the stream clients
(one asyncio event loop, one task per stream, each asking for a reply again as soon as the last one ended).

Both are started with multiprocessing's "spawn" and talk to the bench through shared counters and a queue.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
LONG, QUICK = "[a long reply, please]", "[a quick reply, please]"
# Shared counters (multiprocessing.Array("q")): streams that received a delta and have not ended, deltas received,
# replies ended with `done`, ended otherwise (error/conflict event, refused, broken), requests sent.
FLOWING, DELTAS, DONE, FAILED, SENT = range(5)
WORDS = "the tide turned grey over the harbour while Mira counted the ledgers and listened for the bell".split()


# ---------------------------------------------------------------------------------------------- the scripted model
def serve_model(port, stop, tokens_per_second: float, seconds: tuple[float, float]) -> None:
    """Answer a prompt whose last marker asks for a long reply with `seconds` (a range) of words at
    `tokens_per_second`; any other with a short reply that starts at once."""
    sys.path.insert(0, str(ROOT))
    from tests.llm_server import Reply, start_llm_server

    rng = random.Random(7)

    def reply(prompt: str) -> Reply:
        if prompt.rfind(LONG) > prompt.rfind(QUICK):
            count = int(rng.uniform(*seconds) * tokens_per_second)
            return Reply(" ".join(WORDS[i % len(WORDS)] for i in range(count)), tokens_per_second=tokens_per_second)
        return Reply("Mira looks up from the ledger and nods.")

    server = start_llm_server()
    server.on(lambda prompt: True, reply)
    port.value = server.port
    try:
        while not stop.wait(1):
            with server._lock:
                server.requests.clear()  # a long run would keep every prompt
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------- the stream clients
def run_streams(base_url: str, accounts: list[dict], ramp: float, stop, counters, results) -> None:
    """One event loop, one task per account, until `stop` is set; then every open stream is closed (the server
    stores what arrived as stopped) and a summary goes on `results`."""
    try:
        results.put(asyncio.run(_streams(base_url, accounts, ramp, stop, counters)))
    except KeyboardInterrupt:
        pass


async def _streams(base_url: str, accounts: list[dict], ramp: float, stop, counters) -> dict:
    summary: dict = {"to_context": [], "errors": {}}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(180, connect=60)
    async with httpx.AsyncClient(base_url=f"{base_url}/api/v1", limits=limits, timeout=timeout) as client:
        tasks = [
            asyncio.create_task(_one(client, account, n * ramp / len(accounts), counters, summary))
            for n, account in enumerate(accounts)
        ]
        while not stop.is_set():
            await asyncio.sleep(0.2)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return summary


async def _one(client: httpx.AsyncClient, account: dict, delay: float, counters, summary: dict) -> None:
    await asyncio.sleep(delay)
    headers = {"Authorization": f"Bearer {account['token']}"}
    turn = 0
    while True:
        turn += 1
        body = {"message": f"Tell me about the harbour, turn {turn}. {LONG}", "mode": "new", "stream": True}
        counters[SENT] += 1
        flowing, outcome = False, "broken"
        started = time.perf_counter()
        try:
            async with client.stream("POST", f"/chats/{account['chat']}/generate", json=body, headers=headers) as r:
                if r.status_code != 200:
                    outcome = f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
                else:
                    event = ""
                    async for line in r.aiter_lines():
                        if line.startswith("event:"):
                            event = line[6:].strip()
                            if event == "context":
                                summary["to_context"].append(time.perf_counter() - started)
                            elif event == "delta":
                                counters[DELTAS] += 1
                                if not flowing:
                                    flowing = True
                                    counters[FLOWING] += 1
                            elif event in ("done", "error", "conflict"):
                                outcome = event
        except httpx.HTTPError as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if flowing:
                counters[FLOWING] -= 1
        if outcome == "done":
            counters[DONE] += 1
            continue
        counters[FAILED] += 1
        kind = outcome.split(":")[0]
        summary["errors"].setdefault(kind, [0, outcome])[0] += 1
        await asyncio.sleep(1)  # as a client would before asking again
