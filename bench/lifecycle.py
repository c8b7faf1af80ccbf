"""Memory lifecycle figures: classification throughput at 1,000 and 100,000 memories of one character, and
duplicate-detection precision and recall on a labelled set of pairs.

    .venv/bin/python bench/lifecycle.py [--sizes 1000 100000] [--batch 200] [--rebuild]

Data lives in its own database, `lorekeeper_bench_lifecycle`, and is reused while present (`--rebuild` redoes it).
Embeddings are the deployment's real local model (all-MiniLM-L6-v2); the model is the scripted OpenAI-compatible
server of the tests (tests/llm_server.py) on 127.0.0.1, answering at once: INDEPENDENT to every supersession
question and no merges to consolidation. Celery runs eagerly (test settings), so a consolidation pass a batch
triggers runs inside the measured time.

1. Throughput. One character holds SIZE fact/event/relationship/preference/detail memories with real-looking
   vectors: 4,000 generated sentences embedded by the local model, the rest noisy variants of them (cosine about
   0.8 to their source, so neighbourhoods are crowded as in a long story). A batch of --batch candidates (a quarter
   reworded copies of stored memories, the rest new) is classified with `memories_submit`, its vectors cached
   beforehand so the figure is the lifecycle's own; the embedding rate of the local model is printed apart.
2. Duplicate detection. bench/lifecycle_pairs.py holds 35 hand-written facts with two paraphrases, a state change
   and an independent fact on the same topic each; unrelated pairs join a fact with another fact's paraphrase. For
   each pair, in a fresh character, the first is stored and the second classified: "rejected" is the prediction
   "duplicate". Precision and recall of that, and the outcomes per label, for profile B, profile A and the Jaccard
   fallback (embeddings off).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

logging.getLogger("celery").setLevel(logging.WARNING)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SEED_TEXTS = 4000
KINDS = ["fact", "event", "relationship", "preference", "detail"]
NAMES = (
    "Mira Corvin Aldric Selene Kael Veyra Marta Finn Isolde Rowan Gideon Nessa Elara Darius Thane Wren Lyra".split()
)
VERBS = "found lost hid sold guarded repaired painted visited burned mapped stole buried studied carried".split()
THINGS = (
    "a brass key|an old map|the silver dagger|a sealed letter|the blue lantern|a wooden flute|the king's seal|"
    "a jar of honey|the iron crown|a torn banner|a music box|the red ledger|a glass eye|the ferry bell"
).split("|")
PLACES = (
    "the harbour|the old mill|the citadel|the library|the northern pass|the temple|the market|the orphanage|"
    "the western tower|the inn|the forge|the bridge|the cellar|the lighthouse"
).split("|")
WHEN = "at dawn|after the storm|during the festival|before the council met|at midnight|in the rain|last winter".split(
    "|"
)


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("LOREKEEPER_DATABASE_NAME", "lorekeeper_bench_lifecycle")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(THINGS)} at {rng.choice(PLACES)} {rng.choice(WHEN)}."


def _user(name: str):
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username=name)
    return user


def _connection(user, server, profile: str):
    from apps.llm.models import Connection
    from apps.llm.services import connection_create

    Connection.objects.filter(user=user).delete()
    return connection_create(user=user, name="bench", base_url=server.url, model="bench", profile=profile)


# --- 1. throughput -----------------------------------------------------------------------------------------------


def build_world(size: int, rebuild: bool):
    """A user whose one character holds `size` memories; made once, reused."""
    from apps.chats.models import Character
    from apps.memories.embeddings import config_for, embed_texts, text_hash
    from apps.memories.models import Memory

    user = _user(f"bench_tp_{size}")
    character = Character.objects.filter(user=user).first() or Character.objects.create(user=user, name="Teller")
    have = Memory.objects.filter(character=character, source_instance="world").count()
    if have == size and not rebuild:
        return user, character, 0.0
    Memory.objects.filter(user=user).delete()
    started = time.perf_counter()
    rng = random.Random(size)
    seeds = list(dict.fromkeys(_sentence(rng) for _ in range(SEED_TEXTS * 2)))[:SEED_TEXTS]
    config = config_for(user)
    base = np.array(embed_texts(config, seeds), dtype=np.float32)
    np_rng = np.random.default_rng(size)
    rows = []
    for i in range(size):
        source = i % len(seeds)
        if i < len(seeds):
            text, vector = seeds[source], base[source]
        else:
            text = f"{seeds[source][:-1]}, as told the {i}th time."
            vector = base[source] + np_rng.normal(0, 0.045, base.shape[1]).astype(np.float32)
            vector /= np.linalg.norm(vector)
        rows.append(
            Memory(
                user=user,
                character=character,
                kind=KINDS[i % len(KINDS)],
                content=text,
                content_hash=text_hash(text),
                embedding=vector.tolist(),
                embedding_model=config.key,
                embedding_dim=len(vector),
                source_instance="world",
            )
        )
        if len(rows) == 5000:
            Memory.objects.bulk_create(rows)
            rows = []
    Memory.objects.bulk_create(rows)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    return user, character, time.perf_counter() - started


def measure_throughput(size: int, batch: int, server, rebuild: bool, *, consolidate: bool) -> dict:
    from django.conf import settings
    from django.test import override_settings

    from apps.memories.embeddings import config_for, embed_texts
    from apps.memories.models import Decision, LifecycleJob, Memory
    from apps.memories.services.lifecycle.classify import Candidate, memories_submit

    user, character, built = build_world(size, rebuild)
    connection = _connection(user, server, "B")
    # Leave the world as built: candidates of earlier runs go.
    Memory.objects.filter(character=character).exclude(source_instance="world").delete()
    Memory.objects.filter(character=character, status="retired").update(status="active", retired_reason="")
    Decision.objects.filter(user=user).delete()
    LifecycleJob.objects.filter(user=user).delete()
    rng = random.Random(size * 7 + int(time.time()))
    stored = list(
        Memory.objects.filter(character=character).order_by("?").values_list("kind", "content")[: batch // 4]
    )
    candidates = [Candidate(kind=kind, content=content.replace(" at ", " over at ", 1)) for kind, content in stored]
    while len(candidates) < batch:
        candidates.append(
            Candidate(kind=rng.choice(KINDS[:4]), content=_sentence(rng).replace(".", f" ({rng.random():.6f})."))
        )
    texts = [c.content for c in candidates]
    started = time.perf_counter()
    embed_texts(config_for(user), texts)  # into the cache: what follows measures the lifecycle itself
    embed_s = time.perf_counter() - started
    lifecycle = dict(settings.LOREKEEPER_LIFECYCLE)
    if not consolidate:  # counters that never reach their thresholds
        lifecycle["consolidation"] = {**lifecycle["consolidation"], "thresholds": dict.fromkeys(KINDS, 10**9)}
    server.requests.clear()
    with override_settings(LOREKEEPER_LIFECYCLE=lifecycle):
        started = time.perf_counter()
        results = memories_submit(user=user, candidates=candidates, character=character, connection=connection)
        classify_s = time.perf_counter() - started
    return {
        "size": size,
        "built_s": built,
        "candidates": batch,
        "classify_s": classify_s,
        "per_s": batch / classify_s,
        "embed_per_s": batch / embed_s,
        "outcomes": Counter(r.outcome for r in results),
        "model_calls": len(server.requests),
        "consolidations": LifecycleJob.objects.filter(user=user).count(),
    }


# --- 2. duplicate detection ----------------------------------------------------------------------------------------


def labelled_pairs(seed: int = 11) -> list[tuple[str, str, str]]:
    """(first, second, label): label is duplicate, state_change, independent or unrelated."""
    from bench.lifecycle_pairs import FACTS

    rng = random.Random(seed)
    pairs = []
    for fact, para1, para2, change, independent in FACTS:
        pairs += [(fact, para1, "duplicate"), (fact, para2, "duplicate"), (fact, change, "state_change")]
        pairs.append((fact, independent, "independent"))
    for i, row in enumerate(FACTS):
        for _ in range(2):
            j = rng.choice([k for k in range(len(FACTS)) if k != i])
            pairs.append((row[0], FACTS[j][rng.choice((1, 2))], "unrelated"))
    return pairs


def measure_detection(label: str, server, *, profile: str, embeddings: bool) -> dict:
    from apps.chats.models import Character
    from apps.memories.services.lifecycle.classify import Candidate, memories_submit
    from apps.memories.services.settings import embedding_settings_set

    user = _user(f"bench_dup_{label}")
    Character.objects.filter(user=user).delete()
    embedding_settings_set(user=user, provider="local" if embeddings else "none")
    connection = _connection(user, server, profile)
    confusion: dict[str, Counter] = {}
    started = time.perf_counter()
    pairs = labelled_pairs()
    for first, second, kind in pairs:
        character = Character.objects.create(user=user, name="Pair")
        memories_submit(user=user, candidates=[Candidate("fact", first)], character=character, connection=connection)
        [result] = memories_submit(
            user=user, candidates=[Candidate("fact", second)], character=character, connection=connection
        )
        confusion.setdefault(kind, Counter())[result.outcome] += 1
    elapsed = time.perf_counter() - started
    tp = confusion["duplicate"]["rejected"]
    fp = sum(c["rejected"] for k, c in confusion.items() if k != "duplicate")
    fn = sum(confusion["duplicate"].values()) - tp
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "label": label,
        "pairs": len(pairs),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "confusion": confusion,
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    _setup_django()
    from tests.llm_server import start_llm_server

    server = start_llm_server()
    server.on("Answer UPDATE, DUPLICATE, INDEPENDENT or CONTRADICTS.", "INDEPENDENT")
    server.on("Memories of kind", '{"merges": []}')
    try:
        print("Classification throughput (scripted model answering at once; vectors cached beforehand)")
        print(
            f"{'memories':>9} {'built s':>8} {'consolidation':>13} {'batch':>6} {'seconds':>8} {'cand/s':>7}  outcomes"
        )
        from apps.memories.embeddings import _local_model, config_for

        _local_model(config_for(_user("bench_warm")).model)  # loaded before anything is timed
        for size in args.sizes:
            for consolidate in (False, True):
                row = measure_throughput(size, args.batch, server, args.rebuild, consolidate=consolidate)
                outcomes = ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items()))
                print(
                    f"{row['size']:>9} {row['built_s']:>8.1f} {'on' if consolidate else 'off':>13} "
                    f"{row['candidates']:>6} {row['classify_s']:>8.2f} {row['per_s']:>7.1f}  {outcomes}; "
                    f"{row['model_calls']} model calls, {row['consolidations']} consolidation passes; "
                    f"local embedding {row['embed_per_s']:.0f} texts/s"
                )
        print()
        print("Duplicate detection on the labelled pairs (predicted duplicate = rejected)")
        for label, profile, embeddings in (
            ("profile B", "B", True),
            ("profile A", "A", True),
            ("Jaccard", "B", False),
        ):
            row = measure_detection(label.replace(" ", "_"), server, profile=profile, embeddings=embeddings)
            print(
                f"{label:<10} pairs {row['pairs']}  precision {row['precision']:.3f}  recall {row['recall']:.3f}  "
                f"F1 {row['f1']:.3f}  ({row['seconds']:.1f} s)"
            )
            for kind in ("duplicate", "state_change", "independent", "unrelated"):
                counts = row["confusion"].get(kind, Counter())
                print(f"    {kind:<13} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
