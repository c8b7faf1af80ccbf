"""What the OpenAI-compatible gateway adds before the first token, and what it writes once the chat is synced.

    .venv/bin/python bench/gateway.py [--messages 5000] [--requests 100] [--workers 2] [--sent N] [--quick]

Starts what a deployment runs for the web, as bench/chat.py does (its services, reused): gunicorn with uvicorn
workers serving config.asgi (production settings), an embedded Valkey and the PostgreSQL cluster of its own in
var/bench_chat, the database `lorekeeper_bench_chat` (its people made again each run), and the scripted model (an
OpenAI-compatible server on one event loop, in a process of its own; its reply here starts at once). No Celery
worker runs: what the writes queue (indexing, extraction) waits in the broker, and is not counted below.

One account with a chat of `--messages` messages (indexed) and a memory for every five messages (embedded). A front
end's request is the whole history as OpenAI messages (a system prompt, then the chat), and a new message of the
person's; the reply, as the client read it, joins the history of the next request, as a front end keeps it. The chat
is named by `X-Lorekeeper-Chat` (no fingerprint to compute), the model by the connection's name. The tables are
vacuumed and analysed once seeded, as autovacuum would have them within a minute on a server in use (without the
statistics, the planner reads the previous run's deleted account and scans a person's every memory for each slot:
40 ms, not 6; without the vacuum, the visibility map that lets the history's digests be read from their index alone
is not set, and the chat's rows are read instead: 13 ms, not 2).

1. Time before the first token, client side (httpx, `"stream": true`, the body serialised beforehand: from sending
   the request to the first chunk with content; the official `openai` SDK's own preparation of a 5,000-message
   request takes most of a second here, the client's cost, the same both ways, so it is left out), `--requests`
   times each, one after another and alternating so that the machine's noise falls on both alike:
   - through the gateway: the history compared with the chat, the new message written, memory recalled and injected,
     the prompt built, the person's model called and its stream relayed;
   - the scripted model called directly, with the same messages.
   p50/p95 of both and the difference (goal: p95 at most 60 ms over the direct call), with the added p95's 90%
   bootstrap interval over the run's requests (its spread from them alone), the server's own steps from
   the Generation rows, and their sum from the request's arrival to the row (generation's `total` counts only its
   own steps, not the gateway's before them). Some steps overlap: `context_gather` runs beside `context_embed` and
   `context_search`, and `context_gather_wait` is how long the build then waited for it.
2. Bytes written per request once the chat is synced (the request adds only the new message and its reply): WAL
   bytes, pg_current_wal_lsn() before one gateway request to before the next (the direct call between them writes
   nothing to the database). The WAL holds everything the cluster wrote meanwhile: the rows, their indexes' entries,
   full-page images after a checkpoint, autovacuum's work.

With `--sent N` the front end sends the system prompt and only the last N messages of the history, as one does
that cuts the history to its model's context. The recall leaves out the chat's turns the request holds (the prompt
has them): with the whole history sent, every turn; with the last N, the turns before them are searched too.

With `--tls` the scripted model is served over TLS (a certificate made for the run, which the servers and the
client trust), as a person's model is reached over the network: each call that opens a connection pays its TLS
handshake, which loopback's round trips keep cheap but not free.

With `--rtt MS` the model is that many milliseconds of round trip away (chat_streams.serve_distance, a relay in
front of it), for the gateway and the direct call alike.

With `--against DIR` (another checkout of the project, a git worktree of an earlier commit), a second server runs
that code on the same database, with this checkout's interpreter and packages (DIR as its working folder), and the
requests alternate between the two (ABBA) on one history: each code's time to the first delta and steps, side by
side. On a host whose speed drifts by a fifth between two runs, that is how two codes are compared; part 2 is then
left out.

Fails (exit 1) only on a broken result: a request refused or ended without a reply, or a chat not grown by two
messages a request. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import ssl
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import chat as chat_bench  # noqa: E402 — the services: the cluster, gunicorn, the scripted model, the account
import httpx  # noqa: E402
import load as load_bench  # noqa: E402 — the Valkey
import psutil  # noqa: E402
import sync as sync_bench  # noqa: E402 — production settings
from chat_figures import DATABASE, percentile  # noqa: E402
from chat_streams import QUICK, serve_distance  # noqa: E402
from context import PLACES, THINGS, sentence  # noqa: E402

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."
WARM = 4  # untimed requests of each kind first: connections, caches, each worker's first request


def seed(messages: int, model_url: str) -> dict:
    """The account, its chat (indexed) and memories (embedded); the chat's messages as a front end sends them."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from apps.chats.models import Message
    from apps.memories.embeddings import text_hash
    from apps.memories.models import Memory
    from apps.memories.services.indexing import chat_index_messages, memories_embed_pending

    call_command("migrate", verbosity=0)
    get_user_model().objects.filter(username="gateway_bench").delete()
    started = time.perf_counter()
    account = chat_bench._account("gateway_bench", model_url, messages=messages)
    chat_index_messages(chat_id=account["chat"])
    facts = [sentence(random.Random(n)) for n in range(messages // 5)]
    Memory.objects.bulk_create(
        Memory(user_id=account["user"], character_id=account["character"], kind="fact", content=f"{text} ({n})",
               content_hash=text_hash(f"{text} ({n})"), origin="extraction", importance=2)
        for n, text in enumerate(facts)
    )  # fmt: skip
    memories_embed_pending(user_id=account["user"])
    with connection.cursor() as cursor:  # as autovacuum would have by then on a server in use: the planner's view
        cursor.execute("VACUUM (ANALYZE) memories_memory, chats_message, chats_chat")
    rows = Message.objects.filter(chat_id=account["chat"]).order_by("index").values_list("is_user", "mes")
    account["history"] = [{"role": "system", "content": SYSTEM}]
    account["history"] += [{"role": "user" if is_user else "assistant", "content": mes} for is_user, mes in rows]
    print(f"(seeded a {messages:,}-message chat and {len(facts):,} memories in {time.perf_counter() - started:.0f} s)")
    return account


def first_delta(http: httpx.Client, url: str, body: dict, headers: dict) -> tuple[float, str]:
    """Seconds from sending the request (its body serialised before) to the first chunk with content, and the whole
    reply, read as OpenAI's server-sent chunks."""
    content = json.dumps({**body, "stream": True}).encode()
    first, parts = None, []
    started = time.perf_counter()
    with http.stream("POST", url, content=content, headers={"Content-Type": "application/json", **headers}) as answer:
        if answer.status_code != 200:
            raise SystemExit(f"{url} refused: {answer.status_code} {answer.read()[:300]!r}")
        for line in answer.iter_lines():
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            chunk = json.loads(line[5:])
            if "error" in chunk:
                raise SystemExit(f"the stream ended with an error: {chunk['error']}")
            for choice in chunk.get("choices", []):
                if (choice.get("delta") or {}).get("content"):
                    if first is None:
                        first = time.perf_counter() - started
                    parts.append(choice["delta"]["content"])
    if first is None:
        raise SystemExit(f"a stream from {url} ended without a reply")
    return first, "".join(parts)


def wal_lsn() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        return cursor.fetchone()[0]


def wal_bytes(before: str, after: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(%s, %s)", [after, before])
        return int(cursor.fetchone()[0])


def certificate_made(folder: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key, as files in `folder`: the scripted model's for `--tls`."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "the scripted model")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    paths = (os.path.join(folder, "model.pem"), os.path.join(folder, "model.key"))
    Path(paths[0]).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    Path(paths[1]).write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def start_distance(model_url: str, rtt: float):
    """The relay that puts the model `rtt` seconds of round trip away, and the URL that reaches it through it."""
    parts = urlsplit(model_url)
    process, stop, port = chat_bench.serving(serve_distance, parts.port, rtt, what="the relay to the model")
    return process, stop, parts._replace(netloc=f"127.0.0.1:{port}").geturl()


def added_p95_interval(through: list[float], straight: list[float], rounds: int = 2000) -> tuple[float, float]:
    """The 5th and 95th percentiles, in ms, of the added p95 over the requests resampled with replacement (each
    request's two timings kept together): a p95 of 60 requests is about their third slowest, and moves with them.
    From few requests a tail's bootstrap is too narrow (it never draws one slower than the slowest seen)."""
    pairs = list(zip(through, straight, strict=True))
    rng = random.Random(0)
    added = []
    for _ in range(rounds):
        sample = rng.choices(pairs, k=len(pairs))
        added.append((percentile([a for a, _ in sample], 95) - percentile([b for _, b in sample], 95)) * 1000)
    return percentile(added, 5), percentile(added, 95)


def _arrival_to_row(steps: list[dict]) -> list[float]:
    """Each request's time in the server before its Generation row: the gateway's steps (from the request's arrival,
    `gateway_receive`) and generation's `total` (its own steps only)."""
    return [
        sum(ms for key, ms in step.items() if key.startswith("gateway_")) + step.get("total", 0)
        for step in steps
        if "gateway_receive" in step
    ]


def sent(history: list[dict], last: int | None) -> list[dict]:
    """What the front end sends of its history: all of it, or the system prompt and the `last` messages."""
    return history if not last else [history[0], *history[1:][-last:]]


def run(base_url: str, model_url: str, account: dict, requests: int, verify=True, last: int | None = None) -> bool:
    from apps.chats.models import Chat
    from apps.generation.models import Generation

    gateway = httpx.Client(timeout=120)
    direct = httpx.Client(timeout=120, verify=verify)
    header = {"Authorization": f"Bearer {account['token']}", "X-Lorekeeper-Chat": str(account["chat"])}
    history = account["history"]
    rng = random.Random(11)
    through, straight, written = [], [], []
    count = Chat.objects.get(pk=account["chat"]).message_count
    began = time.perf_counter()
    lsn = None
    for n in range(WARM + requests):
        topic = f"the {rng.choice(THINGS)} near the {rng.choice(PLACES)}"
        messages = [*history, {"role": "user", "content": f"Rowan asks about {topic} ({n}). {QUICK}"}]
        body = {"model": "scripted", "messages": sent(messages, last)}
        before = wal_lsn()
        if lsn is not None and n > WARM:
            written.append(wal_bytes(lsn, before))  # the previous gateway request, all its writes committed
        lsn = before if n >= WARM else None
        seconds, reply = first_delta(gateway, f"{base_url}/v1/chat/completions", body, header)
        history = [*messages, {"role": "assistant", "content": reply}]
        direct_seconds, _ = first_delta(direct, f"{model_url}/chat/completions", body, {"Authorization": "Bearer k"})
        if n >= WARM:
            through.append(seconds)
            straight.append(direct_seconds)
    time.sleep(1)  # the last reply stored
    written.append(wal_bytes(lsn, wal_lsn()))
    elapsed = time.perf_counter() - began

    grown = Chat.objects.get(pk=account["chat"]).message_count - count
    print(f"\n1. Time before the first token, client side: {requests} streamed requests of each kind, one by one, "
          f"the chat {count:,} messages at the start ({elapsed:.0f} s)")  # fmt: skip
    for label, values in (("through the gateway", through), ("the model called directly", straight)):
        p50, p95 = percentile(values, 50) * 1000, percentile(values, 95) * 1000
        print(f"  {label:<27} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms")
    added = [a - b for a, b in zip(through, straight, strict=True)]
    p50 = (percentile(through, 50) - percentile(straight, 50)) * 1000
    p95 = (percentile(through, 95) - percentile(straight, 95)) * 1000
    print(f"  the gateway adds            p50 {p50:7.1f} ms   p95 {p95:7.1f} ms (goal: p95 at most 60 ms over the "
          f"direct call); request by request: p50 {percentile(added, 50) * 1000:.1f} ms, p95 "
          f"{percentile(added, 95) * 1000:.1f} ms")  # fmt: skip
    low, high = added_p95_interval(through, straight)
    print(f"  the added p95's 90% bootstrap interval over these {len(added)} requests: {low:.1f}-{high:.1f} ms "
          "(the spread from these requests alone: the host's drift between runs comes on top)")  # fmt: skip
    rows = list(Generation.objects.filter(chat_id=account["chat"]).order_by("created_at"))[WARM:]
    steps = [g.prompt_info.get("timings_ms", {}) for g in rows]
    keys = sorted({key for step in steps for key in step})
    if keys:
        print("  the server's own steps before the row, ms p50/p95: " + ", ".join(
            f"{key} {percentile([s.get(key, 0) for s in steps], 50):.0f}/"
            f"{percentile([s.get(key, 0) for s in steps], 95):.0f}" for key in keys
        ))  # fmt: skip
    arrival = _arrival_to_row(steps)
    if arrival:
        print(f"  the server from the request's arrival to the row p50 {percentile(arrival, 50):.1f} ms, p95 "
              f"{percentile(arrival, 95):.1f} ms (the gateway's steps, then generation's: its `total` is only "
              f"theirs)")  # fmt: skip
    model = [(g.first_token_at - g.created_at).total_seconds() for g in rows if g.first_token_at]
    if model:
        print(f"  server: Generation row to the model's first token p50 {percentile(model, 50) * 1000:.1f} ms, "
              f"p95 {percentile(model, 95) * 1000:.1f} ms")  # fmt: skip
    prompts = [len(json.dumps(g.prompt).encode()) for g in rows]
    print(f"\n2. Bytes written per request once the chat is synced (the new message and its reply): WAL "
          f"(pg_current_wal_lsn() difference) p50 {percentile(written, 50) / 1024:,.1f} KiB, p95 "
          f"{percentile(written, 95) / 1024:,.1f} KiB, mean {sum(written) / len(written) / 1024:,.1f} KiB; the "
          f"request's body {len(json.dumps(sent(history, last)).encode()) / 1024:,.0f} KiB, the prompt kept with each "
          f"reply "
          f"(Generation.prompt, as JSON, before TOAST's compression) p50 "
          f"{percentile(prompts, 50) / 1024:,.0f} KiB")  # fmt: skip
    expected = 2 * (WARM + requests)
    if grown != expected:
        print(f"BROKEN: the chat grew by {grown} messages, not {expected} (the new message and the reply a request)")
        return False
    print(f"  (the chat grew by {grown} messages: two a request, as expected)")
    return True


def run_against(urls: dict[str, str], account: dict, requests: int) -> bool:
    """`requests` gateway requests to each server of `urls`, alternating ABBA on one history; what each took."""
    from apps.chats.models import Chat
    from apps.generation.models import Generation

    clients = {label: httpx.Client(timeout=120) for label in urls}
    header = {"Authorization": f"Bearer {account['token']}", "X-Lorekeeper-Chat": str(account["chat"])}
    history, rng, labels = account["history"], random.Random(11), list(urls)
    count = Chat.objects.get(pk=account["chat"]).message_count
    times: dict[str, list[float]] = {label: [] for label in urls}
    order = []
    for n in range(2 * (WARM + requests)):
        label = labels[((n + 1) // 2) % 2]
        topic = f"the {rng.choice(THINGS)} near the {rng.choice(PLACES)}"
        messages = [*history, {"role": "user", "content": f"Rowan asks about {topic} ({n}). {QUICK}"}]
        body = {"model": "scripted", "messages": messages}
        seconds, reply = first_delta(clients[label], f"{urls[label]}/v1/chat/completions", body, header)
        history = [*messages, {"role": "assistant", "content": reply}]
        order.append(label)
        if n >= 2 * WARM:
            times[label].append(seconds)
    time.sleep(1)  # the last reply stored
    rows = list(Generation.objects.filter(chat_id=account["chat"]).order_by("created_at"))
    print(f"\n1. Time to the first delta, client side: {requests} streamed requests to each server, alternating")
    for label in labels:
        p50, p95 = percentile(times[label], 50) * 1000, percentile(times[label], 95) * 1000
        print(f"  {label:<27} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms")
        steps = [g.prompt_info.get("timings_ms", {}) for g, by in zip(rows, order, strict=True) if by == label][WARM:]
        keys = sorted({key for step in steps for key in step})
        print("    its steps before the row, ms p50/p95: " + ", ".join(
            f"{key} {percentile([s.get(key, 0) for s in steps], 50):.1f}/"
            f"{percentile([s.get(key, 0) for s in steps], 95):.1f}" for key in keys
        ))  # fmt: skip
        arrival = _arrival_to_row(steps)
        if arrival:
            print(f"    from the request's arrival to the row p50 {percentile(arrival, 50):.1f} ms, p95 "
                  f"{percentile(arrival, 95):.1f} ms")  # fmt: skip
    grown = Chat.objects.get(pk=account["chat"]).message_count - count
    if grown != 2 * len(order):
        print(f"BROKEN: the chat grew by {grown} messages, not {2 * len(order)}")
        return False
    return True


def main() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000, help="messages in the chat")
    parser.add_argument("--requests", type=int, default=100, help="timed requests of each kind")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--sent", type=int, help="the front end sends only the last N messages (see above)")
    parser.add_argument("--quick", action="store_true", help="a 500-message chat, 20 requests")
    parser.add_argument("--against", type=Path, help="another checkout, served beside this one (see above)")
    parser.add_argument("--tls", action="store_true", help="the scripted model served over TLS (see above)")
    parser.add_argument("--rtt", type=float, default=0.0, help="ms of round trip to the model (see above)")
    args = parser.parse_args()
    if args.quick:
        args.messages, args.requests = 500, 20

    folder = tempfile.mkdtemp(prefix="lorekeeper-gateway-")
    load_bench.DATABASE = DATABASE
    sync_bench.ENV["LOREKEEPER_PROVIDER_ALLOWED_NETWORKS"] = "127.0.0.0/8"  # the scripted model, on loopback
    server = model = valkey = other = distance = None
    ok = False
    try:
        valkey = load_bench.start_services(folder)
        certificate = certificate_made(folder) if args.tls else None
        if certificate:  # trusted by the servers' TLS context (OpenSSL reads the variable) and the direct client
            sync_bench.ENV["SSL_CERT_FILE"] = certificate[0]
        model = chat_bench.start_model(20, (10.0, 20.0), held=60, certificate=certificate)
        model_url = model[2]
        if args.rtt > 0:
            distance = start_distance(model_url, args.rtt / 1000)
            model_url = distance[2]
        chat_bench.start_database()
        account = seed(args.messages, model_url)
        port = sync_bench.free_port()
        server = chat_bench.start_server(port, args.workers, [])
        print(f"The gateway: gunicorn -k apps.common.worker.Worker -w {args.workers}, production settings; a "
              f"{args.messages:,}-message chat{f', the last {args.sent:,} of it sent' if args.sent else ''}; "
              f"{os.cpu_count()} cores ({psutil.cpu_count(logical=False)} physical), "
              f"{psutil.virtual_memory().total / 2**30:.0f} GB; the model over "
              f"{'TLS' if certificate else 'HTTP'}, {args.rtt:g} ms of round trip away")  # fmt: skip
        if args.against:
            other_port = sync_bench.free_port()
            other = chat_bench.start_server(other_port, args.workers, [], root=args.against.resolve())
            urls = {"this checkout": f"http://127.0.0.1:{port}", str(args.against): f"http://127.0.0.1:{other_port}"}
            ok = run_against(urls, account, args.requests)
        else:
            verify = ssl.create_default_context(cafile=certificate[0]) if certificate else True
            ok = run(f"http://127.0.0.1:{port}", model_url, account, args.requests, verify=verify, last=args.sent)
    finally:
        if distance is not None:
            distance[1].set()
            distance[0].join(timeout=5)
        chat_bench.stop([s for s in (server, other) if s is not None], model, valkey, folder)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
