"""Multi-instance sync figures: a new instance's first pull of 50,000 memories, push and pull throughput (items per
second), and bytes on the wire per changed item.

    .venv/bin/python bench/sync_instances.py [--memories 50000] [--changes 5000]

Starts gunicorn (production settings, 2 workers x 8 threads) on a free loopback port against the embedded
PostgreSQL, in a database of its own (`lorekeeper_bench_instances`, emptied first), and talks to it over real HTTP
with the package's SyncClient and its offline instances. The memories are written straight into PostgreSQL (with
384-dimension vectors, as embedded ones carry; pulls do not send vectors), so they reach the feed through its
triggers as any write does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "clients" / "python"))  # lorekeeper_client

import sync as sync_bench  # noqa: E402 — the sync benchmark's gunicorn, on a database of our own

DATABASE = "lorekeeper_bench_instances"
ENV = sync_bench.ENV = {**sync_bench.ENV, "LOREKEEPER_DATABASE_NAME": DATABASE}


def setup(memories: int):
    os.environ.update(ENV)
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from apps.accounts.services import api_token_create
    from apps.chats.models import Character

    call_command("migrate", verbosity=0)
    get_user_model().objects.filter(username="bench_instances").delete()
    user = get_user_model().objects.create_user(username="bench_instances")
    character = Character.objects.create(user=user, name="Mira")
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memory (
                user_id, character_id, kind, content, content_hash, data, embedding, embedding_model, embedding_dim,
                importance, confidence, unconfirmed_count, time_scope, status, retired_reason, source_message_indices,
                source_instance, participating_instances, origin, created_at, updated_at, version, uid, clock,
                changed_by, edited_by
            )
            SELECT %s, %s, (ARRAY['fact','event','relationship','preference'])[1 + g %% 4],
                   'Memory ' || g || ': Mira saw the lantern over the harbour at dusk and counted the boats.',
                   md5(g::text), '{}'::jsonb,
                   (SELECT array_agg(random())::vector FROM generate_series(1, 384) WHERE g > 0),
                   'local:all-MiniLM-L6-v2', 384, 1 + g %% 3, 0.7, 0, '', 'active', '', '{}', '', '{}', 'bench',
                   now(), now(), 1, gen_random_uuid(), '{}'::jsonb, '', ''
            FROM generate_series(1, %s) g
            """,
            [user.pk, character.pk, memories],
        )
    print(f"   ({memories:,} memories written in {time.perf_counter() - started:.1f} s)")
    return user, character, api_token_create(user=user, name="bench")[1]


def first_pull(client, key: str, limit: int) -> tuple[float, int, int]:
    instance = client.instance(key, name=key)
    started = time.perf_counter()
    count = instance.pull(limit=limit)
    return time.perf_counter() - started, count, instance.stats["pull_bytes"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=50_000)
    parser.add_argument("--changes", type=int, default=5_000)
    args = parser.parse_args()

    print(f"Multi-instance sync: {args.memories:,} memories, gunicorn 2x8 over loopback HTTP")
    user, character, token = setup(args.memories)
    port = sync_bench.free_port()
    server = sync_bench.start_server(port)
    from lorekeeper_client.http import SyncClient

    client = SyncClient(f"http://127.0.0.1:{port}", token=token, timeout=300)
    try:
        # The server loads its embedding model at start, in the background: a search waits for it, so the
        # figures below do not share the CPU with it.
        for _ in range(2):  # each of the two workers
            client.request("POST", "/memories/search", json={"query": "lantern", "character": character.pk})
        print("\n1. A new instance's first (full) pull")
        for index, limit in enumerate((500, 2000)):
            seconds, count, size = first_pull(client, f"new-{index}", limit)
            print(
                f"   pages of {limit:>4}: {count:,} items in {seconds:5.1f} s = {count / seconds:7,.0f} items/s, "
                f"{size / count:5.0f} bytes per item"
            )

        laptop = client.instance("laptop", name="Laptop")
        laptop.pull(limit=2000)
        phone = client.instance("phone", name="Phone")
        phone.pull(limit=2000)

        print(f"\n2. Push: {args.changes:,} edited memories from one instance")
        uids = sorted(laptop.local("memory"))[: args.changes]
        for number, uid in enumerate(uids):
            laptop.update("memory", uid, {"content": f"Edited {number}: Mira relit the lantern."})
        laptop.stats["push_bytes"] = 0
        for batch in (100, 500):
            subset = uids[: args.changes // 2] if batch == 100 else uids[args.changes // 2 :]
            pending = {key: value for key, value in laptop.queue.items() if key[1] in set(subset)}
            others = {key: value for key, value in laptop.queue.items() if key not in pending}
            laptop.queue = pending
            before = laptop.stats["push_bytes"]
            started = time.perf_counter()
            results = laptop.push(batch=batch)
            seconds = time.perf_counter() - started
            laptop.queue = others
            applied = sum(r["result"] == "applied" for r in results)
            print(
                f"   batches of {batch:>3}: {len(results):,} changes in {seconds:5.1f} s = "
                f"{len(results) / seconds:6,.0f} items/s ({applied:,} applied), "
                f"{(laptop.stats['push_bytes'] - before) / len(results):4.0f} bytes per changed item sent"
            )

        print(f"\n3. Pull: another instance takes the {args.changes:,} changes")
        phone.stats["pull_bytes"] = 0
        started = time.perf_counter()
        count = phone.pull(limit=500)
        seconds = time.perf_counter() - started
        print(
            f"   {count:,} items in {seconds:5.2f} s = {count / seconds:6,.0f} items/s, "
            f"{phone.stats['pull_bytes'] / max(count, 1):4.0f} bytes per changed item"
        )

        print("\n4. One change: what travels")
        uid = uids[0]
        phone.update("memory", uid, {"content": "One more edit."})
        phone.stats["push_bytes"] = 0
        started = time.perf_counter()
        phone.push()
        push_ms = (time.perf_counter() - started) * 1000
        laptop.stats["pull_bytes"] = 0
        started = time.perf_counter()
        count = laptop.pull()
        pull_ms = (time.perf_counter() - started) * 1000
        print(
            f"   push {phone.stats['push_bytes']} bytes in {push_ms:.0f} ms; the other instance's pull: {count} item, "
            f"{laptop.stats['pull_bytes']} bytes in {pull_ms:.0f} ms (a full push of all {args.memories:,} "
            f"would be about {phone.stats['push_bytes'] * args.memories / 1e6:,.0f} MB)"
        )
    finally:
        client.close()
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
