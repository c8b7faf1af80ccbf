"""Incremental sync against full saves, append latency against chat length, and throughput under concurrency.

    .venv/bin/python bench/sync.py [--quick]

Starts gunicorn (production settings, 2 workers x 8 threads) on a free loopback port against the embedded
PostgreSQL, in a database of its own (`lorekeeper_bench`), and talks to it over real HTTP with the package's
SyncClient. Figures (issue 3):
  - a 500-message chat: bytes and server time to edit one message via save versus patch, and to add one via save
    versus append (target: the patch under 2 KB and at least 500x smaller than the save);
  - append latency at 100, 10,000 and 100,000 messages (target: the 100,000 figure within 1.5x of the 100 one);
  - appends per second with 16 clients on 16 chats, and 16 clients on one chat resolving conflicts through the
    client's loop (target: no message lost or doubled).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))  # lorekeeper_client

ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings.production",
    "LOREKEEPER_DATABASE_NAME": "lorekeeper_bench",
    "SECRET_KEY": "bench-only-" + "x" * 50,
    "ALLOWED_HOSTS": "127.0.0.1,localhost",
    "SECURE_SSL_REDIRECT": "false",
    "LOREKEEPER_MAX_JSON_BYTES": str(50 * 1024 * 1024),
    "LOG_LEVEL": "ERROR",
    "LOREKEEPER_API_RATE": "1000000/min",  # sixteen clients share one token here: throughput, not the limit
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, *, workers: int = 2, threads: int = 8, keep_alive: int = 2) -> subprocess.Popen:
    """gunicorn with production settings; `threads` 1 is gunicorn's plain sync worker."""
    env = {**os.environ, **ENV}
    env.pop("DATABASE_URL", None)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            *(["--worker-class", "gthread", "--threads", str(threads)] if threads > 1 else []),
            "--keep-alive",
            str(keep_alive),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group: the master and its workers can be stopped together
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    server.terminate()
    raise SystemExit("gunicorn did not start")


def setup() -> tuple:
    os.environ.update(ENV)
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.accounts.services import api_token_create

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    return user, api_token_create(user=user, name="bench")[1]


def make_chat(user, messages: int, tmp: Path):
    from import_export import generate

    from apps.chats.services.chats import chat_import

    path = tmp / f"chat-{messages}.jsonl"
    generate(path, messages)
    with path.open("rb") as stream:
        chat = chat_import(user=user, stream=stream, filename=path.name)
    path.unlink()
    return chat


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def wire_comparison(client, user, tmp: Path, repeats: int) -> None:
    chat = make_chat(user, 500, tmp)
    handle = client.chat(chat.pk)
    lines = handle.read_all()
    header = client.http.get(f"/chats/{chat.pk}/").json()
    header_line = {"chat_metadata": header["chat_metadata"], "user_name": "unused", "character_name": "unused"}

    def send(endpoint: str, body: dict) -> tuple[float, int]:
        content = json.dumps(body, ensure_ascii=False).encode()
        request = client.http.build_request(
            "POST",
            f"/chats/{chat.pk}/{endpoint}",
            content=content,
            headers={"Content-Type": "application/json", "If-Match": f'"{handle.integrity}"'},
        )
        seconds, response = timed(lambda: client.http.send(request))
        assert response.status_code == 200, response.text
        handle.integrity = response.json()["integrity"]
        return seconds, len(content)

    results: dict[str, list[tuple[float, int]]] = {k: [] for k in ("save-edit", "patch", "save-add", "append")}
    for i in range(repeats):
        lines[250]["mes"] = f"A corrected line of dialogue, take {i}."
        results["save-edit"].append(send("save", {"chat": [header_line, *lines]}))
        op = {"op": "replace", "path": "/250/mes", "value": f"A corrected line of dialogue, take {i}!"}
        results["patch"].append(send("patch", {"operations": [op]}))
        lines[250]["mes"] = op["value"]
        new = {
            "name": "You",
            "is_user": True,
            "is_system": False,
            "send_date": f"2026-01-02T00:00:{i:02d}Z",
            "mes": f"One more line {i}.",
            "extra": {},
        }
        lines.append(new)
        results["save-add"].append(send("save", {"chat": [header_line, *lines]}))
        new2 = {**new, "send_date": f"2026-01-03T00:00:{i:02d}Z"}
        results["append"].append(send("append", {"messages": [new2]}))
        lines.append(new2)
    median = {k: (statistics.median(s for s, _ in v), statistics.median(b for _, b in v)) for k, v in results.items()}
    print(f"500-message chat, one edit / one new message (median of {repeats}):")
    for name, (seconds, size) in median.items():
        print(f"  {name:10} {size:>10,} bytes  {seconds * 1000:8.1f} ms")
    print(
        f"  edit:  patch is {median['save-edit'][1] / median['patch'][1]:,.0f}x smaller than save, "
        f"{median['save-edit'][0] / median['patch'][0]:.1f}x faster"
    )
    print(
        f"  add:   append is {median['save-add'][1] / median['append'][1]:,.0f}x smaller than save, "
        f"{median['save-add'][0] / median['append'][0]:.1f}x faster"
    )


def append_latency(client, user, tmp: Path, sizes: list[int], repeats: int) -> None:
    """All chats are built first, then appends go round-robin across them, so whatever the machine does in the
    background (checkpoints after the large imports, autovacuum) weighs on every size alike."""
    from django.db import connection

    handles = {}
    for size in sizes:
        handles[size] = client.chat(make_chat(user, size, tmp).pk)
        handles[size].refresh()
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute("ANALYZE chats_message")
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    for i in range(repeats):
        for size, handle in handles.items():
            message = {"name": "You", "is_user": True, "mes": f"append {i}", "send_date": str(i), "extra": {}}
            seconds, _ = timed(lambda message=message, handle=handle: handle.append([message]))
            samples[size].append(seconds)
    figures = {size: statistics.median(values) for size, values in samples.items()}
    for size in sizes:
        print(f"append latency at {size:>7,} messages: median {figures[size] * 1000:6.1f} ms over {repeats}")
    small, large = min(sizes), max(sizes)
    print(f"  {large:,} vs {small:,} messages: {figures[large] / figures[small]:.2f}x")


def throughput(base_url: str, token: str, user, clients: int, per_client: int) -> None:
    from lorekeeper_client.http import SyncClient

    from apps.chats.models import Chat
    from apps.chats.services.chats import chat_create

    for shared in (False, True):
        chats = [chat_create(user=user, title=f"throughput {n}") for n in range(1 if shared else clients)]
        conflicts, failures = [], []

        def work(n, chats=chats, shared=shared, conflicts=conflicts, failures=failures):
            client = SyncClient(base_url, token=token, debounce=0)
            handle = client.chat(chats[0 if shared else n].pk)
            try:
                for i in range(per_client):
                    handle.append([{"name": f"client {n}", "mes": f"{n}:{i}"}])
            except Exception as exc:
                failures.append(exc)
            conflicts.append(client.stats.conflicts)
            client.http.close()

        threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        from apps.chats.models import Message

        texts = list(Message.objects.filter(chat__in=chats).values_list("mes", flat=True))
        expected = sorted(f"{n}:{i}" for n in range(clients) for i in range(per_client))
        lost = len(set(expected) - set(texts))
        doubled = len(texts) - len(set(texts))
        total = sum(Chat.objects.get(pk=c.pk).message_count for c in chats)
        label = "16 clients, one chat " if shared else "16 clients, 16 chats "
        print(
            f"{label}: {clients * per_client / seconds:7.1f} appends/s ({total} stored, {lost} lost, "
            f"{doubled} doubled, {sum(conflicts)} conflicts resolved)"
        )
        if lost or doubled or failures:  # a broken run, not a figure
            raise SystemExit(f"{label.strip()}: {lost} lost, {doubled} doubled, clients failed: {failures}")


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("django.request").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    user, token = setup()
    port = free_port()
    server = start_server(port)
    base_url = f"http://127.0.0.1:{port}"
    try:
        from lorekeeper_client.http import SyncClient

        client = SyncClient(base_url, token=token, debounce=0)
        with tempfile.TemporaryDirectory() as tmp:
            wire_comparison(client, user, Path(tmp), repeats=3 if args.quick else 7)
            sizes = [100, 1_000] if args.quick else [100, 10_000, 100_000]
            append_latency(client, user, Path(tmp), sizes, repeats=10 if args.quick else 40)
        throughput(base_url, token, user, clients=16, per_client=5 if args.quick else 20)
    finally:
        server.terminate()
        server.wait(timeout=30)
        from apps.chats.models import Chat

        Chat.objects.filter(user=user).delete()


if __name__ == "__main__":
    main()
