"""What bench/chat.py measures with and prints: latency percentiles, CPU time by group of processes, the web
workers' resident memory, the database connections they hold, and part 2 (the time before the first token)."""

from __future__ import annotations

import contextlib
import json
import statistics
import time
import uuid

import httpx
import psutil
from chat_streams import QUICK

DATABASE = "lorekeeper_bench_chat"


def percentile(values: list[float], p: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def workers_rss(pid: int) -> int:
    """The resident memory of the children of process `pid` (gunicorn's workers)."""
    return sum(child.memory_info().rss for child in psutil.Process(pid).children(recursive=True))


def cpu_seconds(groups: dict[str, tuple[int, bool]]) -> dict[str, float]:
    """CPU time used so far by each group (a process, with its children if asked, and the children they reaped:
    PostgreSQL's ended backends)."""
    used = {}
    for group, (pid, children) in groups.items():
        used[group] = 0.0
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            for one in [process, *(process.children(recursive=True) if children else [])]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    times = one.cpu_times()
                    used[group] += times.user + times.system + times.children_user + times.children_system
    machine = psutil.cpu_times()
    used["the rest of the machine"] = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
    used["the rest of the machine"] -= sum(v for k, v in used.items() if k != "the rest of the machine")
    return used


def cpu_line(before: dict[str, float], after: dict[str, float], seconds: float) -> str:
    shares = ", ".join(f"{group} {(after[group] - before[group]) / seconds:.2f}" for group in before)
    return f"   CPU (cores busy): {shares}"


def database_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [DATABASE])
        return cursor.fetchone()[0] - 1  # not this one


def _generate(http: httpx.Client, chat: int, body: dict, integrity: str | None) -> tuple[float, float, str]:
    """One streamed generation: seconds to the `context` event, to the first delta, and the chat's new integrity."""
    headers = {"If-Match": f'"{integrity}"'} if integrity else {}
    started = time.perf_counter()
    marks: dict[str, float] = {}
    with http.stream("POST", f"/chats/{chat}/generate", json=body, headers=headers) as response:
        if response.status_code != 200:
            raise SystemExit(f"generate refused: {response.status_code} {response.read()[:300]!r}")
        event = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
                marks.setdefault(event, time.perf_counter() - started)
            elif line.startswith("data:") and event in ("done", "error", "conflict"):
                if event != "done":
                    raise SystemExit(f"generation ended with {event}: {line[:300]}")
                integrity = json.loads(line[5:])["integrity"]
    return marks["context"], marks.get("delta", float("nan")), integrity


def first_tokens(base_url: str, long: dict, count: int) -> None:
    from apps.generation.models import Generation

    to_context, to_delta, integrity = [], [], None
    headers = {"Authorization": f"Bearer {long['token']}"}
    with httpx.Client(base_url=f"{base_url}/api/v1", timeout=120, headers=headers) as http:
        for n in range(count + 3):  # three untimed: connections and caches
            body = {"message": f"What is in the ledger, {n}? {QUICK}", "mode": "new", "stream": True}
            context, delta, integrity = _generate(http, long["chat"], body, integrity)
            if n >= 3:
                to_context.append(context)
                to_delta.append(delta)
        builds = []  # the context build alone, through the API that answers its own timings
        for _ in range(count):
            started = time.perf_counter()
            answer = http.post(f"/chats/{long['chat']}/context", json={"message": f"And the ledger, {uuid.uuid4()}?"})
            builds.append((time.perf_counter() - started, answer.json().get("timings_ms", {})))
    rows = Generation.objects.filter(chat_id=long["chat"], first_token_at__isnull=False).order_by("created_at")
    model = [(g.first_token_at - g.created_at).total_seconds() for g in rows][3:]
    print(f"\n2. Time before the first token: a {long['messages']:,}-message chat, {count} generations one by one")
    for label, values in (
        ("to the context event", to_context),
        ("to the first delta", to_delta),
        ("server: row to 1st token", model),
    ):
        print(
            f"  {label:<26} p50 {percentile(values, 50) * 1000:7.1f} ms   p95 {percentile(values, 95) * 1000:7.1f} ms"
        )
    steps = {key: statistics.median(t.get(key, 0) for _, t in builds) for key in builds[0][1]}
    print(f"  {'the context build alone':<26} p50 {percentile([b[0] for b in builds], 50) * 1000:7.1f} ms   p95 "
          f"{percentile([b[0] for b in builds], 95) * 1000:7.1f} ms (POST /context; the server's medians, ms: "
          + ", ".join(f"{k} {v:.0f}" for k, v in steps.items()) + ")")  # fmt: skip
    print("  (server: Generation.created_at, the end of the context build, to first_token_at: the model's stream "
          "opened and its first delta read; the scripted reply starts at once)")  # fmt: skip
    steps = [g.prompt_info.get("timings_ms", {}) for g in rows][3:]
    split = {key: [t.get(key, 0) / 1000 for t in steps] for key in ("append", "context", "prompt", "total")}
    print("  the server's own steps before the row, ms p50/p95: " + ", ".join(
        f"{key} {percentile(v, 50) * 1000:.0f}/{percentile(v, 95) * 1000:.0f}" for key, v in split.items()
    ))  # fmt: skip


# ---------------------------------------------------------------------------------------------- the runs
def latency_table(quiet: dict[str, list[float]], busy: dict[str, list[float]], streams: int) -> None:
    print(f"  {'endpoint':<9}{'requests':>9}{'p50 ms':>9}{'p95 ms':>9}  |{'requests':>9}{'p50 ms':>9}{'p95 ms':>9}"
          f"{'p95 ratio':>11}")  # fmt: skip
    print(f"  {'':<9}{'no streams':>27}  |{f'{streams} streams':>27}")
    for endpoint in quiet:
        a, b = quiet[endpoint], busy[endpoint]
        pa, pb = (
            (percentile(a, 50) * 1000, percentile(a, 95) * 1000),
            (percentile(b, 50) * 1000, percentile(b, 95) * 1000),
        )
        print(f"  {endpoint:<9}{len(a):>9}{pa[0]:>9.1f}{pa[1]:>9.1f}  |{len(b):>9}{pb[0]:>9.1f}{pb[1]:>9.1f}"
              f"{pb[1] / pa[1]:>10.2f}x")  # fmt: skip


def streams_report(args, run: dict, quiet: dict, accounts: list[dict]) -> None:
    latency_table(quiet, run["timings"], len(accounts))
    print(f"  streams receiving deltas when the run started: {run['at_start']}, when it ended: {run['at_end']} "
          f"(of {len(accounts)}); generations started during the run: {run['started']:.1f}/s")  # fmt: skip
    print(f"  deltas delivered: {run['deltas']:,.0f}/s (the model sends {len(accounts) * args.tps:,.0f} tokens/s, "
          f"one event a window a stream), {run['done']} replies completed; ended otherwise "
          f"{run['failed']}")  # fmt: skip
    to_context = run["summary"]["to_context"]
    print(f"  streams' time to the context event: p50 {percentile(to_context, 50) * 1000:.0f} ms, "
          f"p95 {percentile(to_context, 95) * 1000:.0f} ms over {len(to_context)}")  # fmt: skip
    for kind, (count, text) in run["summary"]["errors"].items():
        print(f"  stream failures {kind} x{count}: {text}")
