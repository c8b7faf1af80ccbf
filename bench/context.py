"""Context builder figures: build latency with 10,000 memories of one character and a 2,000-message chat (query
embedding included and excluded), and token efficiency (injected tokens against the whole chat's) at 500 and 2,000
messages.

    .venv/bin/python bench/context.py [--builds 100] [--rebuild] [--small]

Data lives in its own database, `lorekeeper_bench_context`, and is reused while complete (`--rebuild` redoes it).
Embeddings are the deployment's real local model (all-MiniLM-L6-v2): 1,500 distinct generated story sentences are
embedded, and the 10,000 memories (facts, events, relationships, preferences, knowledge, arcs persistent and of
the chat, session memories, the state ledger, scene recaps, profiles, a summary, canon) are those sentences retold
with noisy copies of their vectors; the 2,000 messages are indexed and embedded for real. Each build is a real one
(`context_build`, not a preview): the pending message is the chat's last user message, so its recall is searched
and kept on it (a write to the chat). What a write queues for the workers (indexing, extraction) is left out of
the timing: in production it is one message to the broker.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from _switch import switched_off

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PEOPLE = "Mira Rowan Corvin Tessa Hale Brin Odo Sefa Ilse Varro Pell Wren Halloran Edric Tamsin Jory".split()
PLACES = "harbour lighthouse chapel market tavern warehouse bridge mill tower archive docks cellar orchard".split()
THINGS = "ledger seal key lantern map ring dagger letter coin compass bell cloak barrel rope".split()
VERBS = "hid found stole burned sold mended buried traded lost carried forged opened guarded".split()
KINDS = [  # (kind, how many, scope: character or chat)
    ("fact", 3000, "character"),
    ("event", 2000, "character"),
    ("relationship", 500, "character"),
    ("preference", 500, "character"),
    ("epistemic", 1000, "character"),
    ("arc", 200, "character"),
    ("arc", 300, "chat"),
    ("detail", 600, "chat"),
    ("revelation", 400, "chat"),
    ("development", 300, "chat"),
    ("scene", 200, "chat"),
    ("state", 300, "chat"),
    ("scene_recap", 193, "chat"),
    ("profile", 3, "chat"),
    ("summary", 1, "chat"),
    ("canon", 1, "character"),
]
SEEDS = 1500
SMALL = 10  # --small: a world a tenth the size (its own user, so the full world is kept), for a quick run


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ["LOREKEEPER_DATABASE_NAME"] = "lorekeeper_bench_context"
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    for name in ("httpx", "httpx2", "celery", "sentence_transformers", "apps"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def sentence(rng: random.Random) -> str:
    who, other = rng.sample(PEOPLE, 2)
    return (
        f"{who} {rng.choice(VERBS)} the {rng.choice(THINGS)} near the {rng.choice(PLACES)} "
        f"while {other} watched from the {rng.choice(PLACES)}."
    )


def message_text(rng: random.Random, i: int) -> str:
    return f'{sentence(rng)} *{rng.choice(PEOPLE)} glances at the {rng.choice(THINGS)}.* "Turn {i}, then."'


@contextmanager
def _queued_elsewhere():
    """What a write queues for the workers is one broker message in production: not run inside the build here."""
    from apps.extraction.services import queue as extraction_queue
    from apps.memories.services import queue as memory_queue

    with switched_off(
        (memory_queue, "enqueue_index_chat"),
        (memory_queue, "enqueue_embed_pending"),
        (memory_queue, "enqueue_lifecycle_job"),
        (extraction_queue, "enqueue_run"),
    ):
        yield


def build_world(rebuild: bool, scale: int = 1):
    from django.contrib.auth import get_user_model

    from apps.chats.models import Character, Chat, Message
    from apps.chats.services.chats import chat_create
    from apps.memories.embeddings import config_for, embed_texts, text_hash
    from apps.memories.models import Memory
    from apps.memories.services.indexing import chat_index_messages, memories_embed_pending

    username = "bench_context" if scale == 1 else "bench_context_small"
    small, large = 500 // scale, 2000 // scale
    kinds = [(kind, max(1, count // scale), where) for kind, count, where in KINDS]
    user, _ = get_user_model().objects.get_or_create(username=username)
    character = Character.objects.filter(user=user).first()
    chats = {c.message_count: c for c in Chat.objects.filter(user=user)}
    complete = (
        character is not None
        and set(chats) >= {small, large}
        and Memory.objects.filter(user=user).exclude(kind="message").count() == sum(n for _, n, _ in kinds)
        and Memory.objects.filter(user=user, kind="message", embedding__isnull=False).count() >= 2400 // scale
    )
    if complete and not rebuild:
        return user, chats[small], chats[large]
    started = time.perf_counter()
    get_user_model().objects.filter(username=username).delete()
    user = get_user_model().objects.create_user(username=username)
    character = Character.objects.create(user=user, name="Mira", description="A harbour clerk with a sharp eye.")
    rng = random.Random(7)
    chats = {}
    with _queued_elsewhere():
        for size in (small, large):
            chat = chat_create(user=user, title=f"{size} messages", character_ids=[character.pk], user_name="Rowan")
            Message.objects.bulk_create(
                Message(
                    chat=chat,
                    index=i,
                    name="Rowan" if i % 2 else "Mira",
                    is_user=bool(i % 2),
                    mes=message_text(rng, i),
                )
                for i in range(size)
            )
            Chat.objects.filter(pk=chat.pk).update(message_count=size)
            chat.refresh_from_db()
            chat_index_messages(chat_id=chat.pk)
            chats[size] = chat
    config = config_for(user)
    seeds = list(dict.fromkeys(sentence(rng) for _ in range(SEEDS * 2)))[: SEEDS // scale]
    base = np.array(embed_texts(config, seeds), dtype=np.float32)
    embedded = time.perf_counter() - started
    noise = np.random.default_rng(7)
    rows = []
    for kind, count, scope in kinds:
        for _ in range(count):
            seed = rng.randrange(len(seeds))
            vector = base[seed] + noise.normal(0, 0.35 / np.sqrt(base.shape[1]), base.shape[1]).astype(np.float32)
            vector /= np.linalg.norm(vector)
            content = f"{seeds[seed]} ({kind} {len(rows)})"
            data = {}
            if kind == "epistemic":
                content, data = f"Mira knows: {seeds[seed]} ({len(rows)})", {"holder": "Mira", "stance": "knows"}
            elif kind == "arc":
                data = {"status": "open" if rng.random() < 0.7 else "resolved"}
            elif kind == "relationship":
                data = {"pair": ["mira", rng.choice(PEOPLE).lower()], "history": True}
            elif kind == "profile":
                data = {"section": ["character_state", "world_state", "relationship_matrix"][len(rows) % 3]}
            elif kind == "summary":
                content = " ".join(sentence(rng) for _ in range(120))
            rows.append(
                Memory(
                    user=user,
                    character=character if scope == "character" else None,
                    chat=chats[large] if scope == "chat" else None,
                    source_chat=chats[large],
                    kind=kind,
                    content=content,
                    content_hash=text_hash(content),
                    data=data,
                    importance=rng.choice([1, 2, 2, 3]),
                    embedding=vector.tolist(),
                    embedding_model=config.key,
                    embedding_dim=len(vector),
                    origin="extraction",
                )
            )
    Memory.objects.bulk_create(rows, batch_size=2000)
    memories_embed_pending(user_id=user.pk)  # the 2,500 messages, for real
    print(f"(world built in {time.perf_counter() - started:.0f} s; {embedded:.0f} s of it embedding the seeds)")
    return user, chats[small], chats[large]


def latency(user, chat, builds: int) -> None:
    from apps.chats.models import Message
    from apps.injection.services.context import context_build
    from apps.memories.models import Memory

    rng = random.Random(11)
    last_user = Message.objects.filter(chat=chat, is_user=True).order_by("-index").first()
    totals, without, embeds, injected, sources = [], [], [], [], []
    with _queued_elsewhere():
        for i in range(builds + 5):
            question = f"What did {rng.choice(PEOPLE)} do with the {rng.choice(THINGS)} at the {rng.choice(PLACES)}?"
            Message.objects.filter(pk=last_user.pk).update(mes=question)
            context = context_build(user=user, chat=chat, message=question)
            if i < 5:
                continue  # warm-up
            total, embed = context.timings_ms["total"], context.timings_ms.get("embed", 0.0)
            totals.append(total)
            embeds.append(embed)
            without.append(total - embed)
            injected.append(context.injected_tokens)
            sources.append(context.recall["source"])
    q = lambda values, p: sorted(values)[min(len(values) - 1, int(round(p * (len(values) - 1))))]  # noqa: E731
    memories = Memory.objects.filter(user=user).exclude(kind="message").count()
    print(f"\n1. Context build latency, {builds} builds ({memories:,} memories, {chat.message_count:,}-message chat)")
    print(f"   query embedding included: p50 {statistics.median(totals):6.1f} ms   p95 {q(totals, 0.95):6.1f} ms")
    print(
        f"   query embedding excluded: p50 {statistics.median(without):6.1f} ms   p95 {q(without, 0.95):6.1f} ms  "
        f"(target: p95 under 150 ms)"
    )
    print(f"   the query's embedding:    p50 {statistics.median(embeds):6.1f} ms   p95 {q(embeds, 0.95):6.1f} ms")
    print(
        f"   injected p50 {statistics.median(injected):.0f} tokens; recall kept on the turn in "
        f"{sources.count('new')} of {len(sources)} builds"
    )


def efficiency(user, chats) -> None:
    from apps.chats.models import Message
    from apps.injection.services.context import context_build
    from apps.llm.tokens import count_tokens

    print("\n2. Token efficiency: what is injected against the whole chat history")
    for chat in chats:
        history = sum(
            count_tokens(f"{name}: {mes}")
            for name, mes in Message.objects.filter(chat=chat).values_list("name", "mes")
        )
        question = "What did Corvin do with the ledger at the harbour?"
        context = context_build(user=user, chat=chat, message=question, preview=True)
        injected = context.injected_tokens
        print(
            f"   {chat.message_count:>5} messages: history {history:>7,} tokens, injected {injected:>5,} tokens "
            f"= {injected / history:6.1%} of it ({history / max(injected, 1):5.1f}x smaller)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--builds", type=int, default=100)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--small", action="store_true", help="a tenth of the world (its own user)")
    args = parser.parse_args()
    _setup_django()
    user, small, large = build_world(args.rebuild, SMALL if args.small else 1)
    latency(user, large, args.builds)
    efficiency(user, [small, large])


if __name__ == "__main__":
    main()
