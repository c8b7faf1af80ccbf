"""Memory lifecycle figures: classification throughput at 1,000 and 100,000 memories of one character, and
duplicate-detection precision and recall on a generated labelled set of pairs.

    .venv/bin/python bench/lifecycle.py [--sizes 1000 100000] [--batch 200] [--rebuild] [--only throughput|detection]
                                        [--seed 11] [--verbose] [--facts N]

Data lives in its own database, `lorekeeper_bench_lifecycle`; the worlds are reused while complete (`--rebuild`
redoes them). Embeddings are the deployment's real local model (all-MiniLM-L6-v2, 384-d, HF_HUB_OFFLINE=1). The
model is the scripted OpenAI-compatible server of the tests (tests/llm_server.py) on 127.0.0.1, answering at once:
INDEPENDENT to every supersession question, {"merges": []} to every consolidation pass.

1. Throughput. One character of one user holds SIZE fact/event/relationship/preference/detail memories: 4,000
   distinct generated story sentences embedded by the local model, the rest noisy normalised variants of those
   vectors (cosine about 0.75 to their source) with retold texts, so a large store is crowded as in a long story.
   A deterministic batch of --batch candidates goes through `memories_submit`: a quarter stored sentences in other
   words (duplicates), an eighth state changes of stored ones ("no longer…"), a quarter same-topic variants (same
   person and template, another slot), the rest sentences about people the store has never seen. Their vectors are
   taken out of the embedding cache first, so the run embeds them as a real one does (one at a time); the time
   spent embedding, asking the model, and consolidating is measured apart. Twice per size: consolidation off
   (thresholds out of reach) and on (default thresholds: the test settings run Celery eagerly, so each pass a
   counter queues runs inline, inside the measured time, against the scripted model). Where the scope is past the
   lifecycle's `exact_max` (HNSW neighbours), a third run with exact scans says how many outcomes HNSW changed.
   The other sizes' world and the detection users share the table (a few thousand rows).
2. Duplicate detection. Pairs built from hand-written story facts (bench/lifecycle_pairs.py and MORE_FACTS below),
   each with two paraphrases (label duplicate), a state change (not a duplicate), an independent fact on the same
   topic, and an unrelated fact drawn with --seed. For each pair, in a fresh character, the first is stored and the
   second classified; predicted duplicate = outcome "rejected". Precision, recall, F1 and the outcomes per label for
   profile B, profile A, the Jaccard fallback (embeddings off for the user), and profile B with a model that answers
   right (DUPLICATE / UPDATE / INDEPENDENT by the label: the ceiling of the model path).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORLD = "bench-world"  # source_instance of the world's rows: what a run adds is told apart by it
SEED_TEXTS = 4000
NOISE = 0.045  # per dimension: a variant's cosine to its source is about 1 / sqrt(1 + 384 * NOISE^2) = 0.75
KINDS = ["fact", "event", "relationship", "preference", "detail"]
LABELS = ("duplicate", "state_change", "independent", "unrelated")
OUTCOMES = ("passed", "superseded", "uncertain", "rejected", "contradiction")
SUPERSESSION_ASK = "Answer UPDATE, DUPLICATE, INDEPENDENT or CONTRADICTS."
CONSOLIDATION_ASK = "Memories of kind"

# --- the generated world ------------------------------------------------------------------------------------------

NAMES = (
    "Mira Corvin Aldric Selene Kael Veyra Marta Finn Isolde Rowan Gideon Nessa Elara Darius Thane Wren Lyra Orin "
    "Sable Hamish Tamsin Bram Ilse Vale Perrin Odette Brannoc Yara Cassia Fenwick Juniper Torvald Astrid Marek Pell "
    "Rosalind Eamon Quinn Hollis Imogen"
).split()
NEW_NAMES = "Zephyrine Baltho Quillon Ysmay Corentin Ottilie Radek Sunniva Thibault Wenna Jasper Leocadia".split()
SLOTS = {
    "p": (
        "the harbour district|the old mill|the citadel|the royal library|the northern pass|the moon temple|"
        "the fish market|the orphanage|the western tower|the Red Lantern inn|the forge|the Sorrow bridge|"
        "the wine cellar|the lighthouse|the tanners' row|the chapel garden|the barracks|the salt flats"
    ).split("|"),
    "o": "Oakvale|Brightwater|Ashford|Daren|Merrow|Karth|Carrow|Greywater|Hollowmere|Stonebridge".split("|"),
    "j": "blacksmith|scribe|ferryman|midwife|lamplighter|cartographer|brewer|tax collector|herbalist|guard".split("|"),
    "t": (
        "a brass key|an old sea chart|a silver dagger|a sealed letter|a blue lantern|a wooden flute|the king's "
        "seal|a jar of honey|an iron crown|a torn banner|a music box|a red ledger|a glass eye|the ferry bell"
    ).split("|"),
    "e": "found|lost|hid|sold|guarded|repaired|burned|buried|stole|carried|broke|returned".split("|"),
    "w": (
        "at dawn|after the storm|during the harvest festival|before the council met|at midnight|in the rain|"
        "last winter|on the night of the eclipse"
    ).split("|"),
    "r": "trusts|distrusts|fears|serves|protects|admires|envies|avoids|courts|resents|owes money to".split("|"),
    "v": "loves|hates|prefers|collects|cannot resist|is bored by|always asks for".split("|"),
    "f": (
        "spiced wine|sea shanties|rainy mornings|dried figs|card games|long rides at night|the smell of pine|"
        "old maps|sweet bread|quiet libraries|horse races|plum brandy|gossip from the docks|chess"
    ).split("|"),
    "i": "cloak|dagger hilt|left boot|signet ring|hair|scar|horse|journal|lute|shield".split("|"),
    "a": (
        "dark green with silver thread|chipped at the edge|patched with red leather|older than the city|stained "
        "with ink|engraved with a wolf|the colour of ash|tied with a blue ribbon|missing a stone|freshly painted"
    ).split("|"),
}
# (template, state-change template or None): {n} a person, {m} another, {p2} another place.
TEMPLATES = {
    "fact": [
        ("{n} lives in {p} of {o}.", "{n} moved out of {p} of {o} and now lives in {p2}."),
        ("{n} works as a {j} in {o}.", "{n} no longer works as a {j} in {o}."),
        ("{n} owns {t}.", "{n} lost {t} and no longer owns it."),
    ],
    "event": [("{n} {e} {t} at {p} {w}.", None), ("{n} met {m} at {p} {w}.", None)],
    "relationship": [("{n} {r} {m}.", "{n} no longer {r} {m}.")],
    "preference": [("{n} {v} {f}.", "{n} no longer {v} {f}.")],
    "detail": [("{n}'s {i} is {a}.", "{n}'s {i} is no longer {a}.")],
}
REWORDED = ("It is known that {x}", "Word is that {x}", "{x} Everyone says so.", "As the story goes, {x}")


def _slots(rng: random.Random, names: list[str]) -> dict[str, str]:
    values = {key: rng.choice(options) for key, options in SLOTS.items()}
    values["n"], values["m"] = rng.sample(names, 2)
    values["p2"] = rng.choice([p for p in SLOTS["p"] if p != values["p"]])
    return values


def world_seeds(count: int = SEED_TEXTS, seed: int = 1) -> list[tuple[str, int, dict[str, str]]]:
    """`count` distinct (kind, template index, slots), kinds in turn: the world's sentences, always the same."""
    rng = random.Random(seed)
    seen, seeds = set(), []
    while len(seeds) < count:
        kind = KINDS[len(seeds) % len(KINDS)]
        index = rng.randrange(len(TEMPLATES[kind]))
        slots = _slots(rng, NAMES)
        text = TEMPLATES[kind][index][0].format(**slots)
        if text not in seen:
            seen.add(text)
            seeds.append((kind, index, slots))
    return seeds


def _text(kind: str, index: int, slots: dict[str, str], *, change: bool = False) -> str:
    return TEMPLATES[kind][index][1 if change else 0].format(**slots)


def batch_candidates(size: int, batch: int) -> list[tuple[str, str, str]]:
    """(type, kind, content) of a deterministic batch for a world of `size`: a quarter duplicates (stored sentences
    reworded), an eighth state changes of stored ones, a quarter same-topic (one slot of a stored sentence
    changed), the rest new people. No text twice, and none but the duplicates' sources is a world sentence."""
    rng = random.Random(size)
    seeds = world_seeds()
    stored = seeds[: min(size, SEED_TEXTS)]
    changeable = [s for s in stored if TEMPLATES[s[0]][s[1]][1]]
    taken = {_text(*s) for s in seeds}
    out: list[tuple[str, str, str]] = []

    def draw(planned_as: str, count: int, make) -> None:
        goal = len(out) + count
        while len(out) < goal:
            kind, text = make()
            if text not in taken:
                taken.add(text)
                out.append((planned_as, kind, text))

    def duplicate() -> tuple[str, str]:
        kind, index, slots = rng.choice(stored)
        return kind, rng.choice(REWORDED).format(x=_text(kind, index, slots))

    def change() -> tuple[str, str]:
        kind, index, slots = rng.choice(changeable)
        return kind, _text(kind, index, {**slots, "p2": rng.choice(SLOTS["p"])}, change=True)

    def topic() -> tuple[str, str]:
        kind, index, slots = rng.choice(stored)
        key = rng.choice([k for k in SLOTS if k != "p2" and "{" + k + "}" in TEMPLATES[kind][index][0]])
        return kind, _text(kind, index, {**slots, key: rng.choice([v for v in SLOTS[key] if v != slots[key]])})

    def new() -> tuple[str, str]:
        kind = rng.choice(KINDS)
        return kind, _text(kind, rng.randrange(len(TEMPLATES[kind])), _slots(rng, NEW_NAMES))

    draw("duplicate", batch // 4, duplicate)
    draw("change", batch // 8, change)
    draw("topic", batch // 4, topic)
    draw("new", batch - len(out), new)
    return out


# --- setup ---------------------------------------------------------------------------------------------------------


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("LOREKEEPER_DATABASE_NAME", "lorekeeper_bench_lifecycle")
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    for name in ("httpx", "httpx2", "celery", "sentence_transformers", "apps.memories", "apps.llm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _user(name: str):
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username=name)
    return user


def _connection(user, server, profile: str):
    from apps.llm.models import Call, Connection
    from apps.llm.services import connection_create

    Call.objects.filter(user=user).delete()
    Connection.objects.filter(user=user).delete()
    return connection_create(  # ticked for background work (consolidation passes), which uses no connection otherwise
        user=user, name="bench", base_url=server.url, model="bench", profile=profile, is_default=True
    )


@contextmanager
def timed(module, name: str, totals: dict[str, float], key: str):
    """Time every call of `module.name` into totals[key] (classify.py and judge.py look these names up at call
    time, so the lifecycle's own code is what is timed)."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - started

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, original)


# --- 1. throughput -------------------------------------------------------------------------------------------------


def build_world(size: int, rebuild: bool):
    """A user whose one character holds `size` memories; made once, reused while complete."""
    from django.db import connection

    from apps.chats.models import Character
    from apps.memories.embeddings import config_for, embed_texts, text_hash
    from apps.memories.models import Memory

    user = _user(f"bench_world_{size}")
    character = Character.objects.filter(user=user).first() or Character.objects.create(user=user, name="Teller")
    config = config_for(user)
    world = Memory.objects.filter(character=character, source_instance=WORLD, embedding_model=config.key)
    if not rebuild and world.count() == size:
        return user, character, None
    Memory.objects.filter(user=user).delete()
    started = time.perf_counter()
    seeds = world_seeds()[:size]  # a small world embeds only the sentences it holds (its first `size`)
    texts = [_text(kind, index, slots) for kind, index, slots in seeds]
    base = np.array(embed_texts(config, texts), dtype=np.float32)
    embed_s = time.perf_counter() - started
    np_rng = np.random.default_rng(size)
    rows = []
    for i in range(size):
        source = i % len(seeds)
        if i < len(seeds):
            text, vector = texts[source], base[source]
        else:
            text = f"{texts[source][:-1]} (retold, #{i})."
            vector = base[source] + np_rng.normal(0, NOISE, base.shape[1]).astype(np.float32)
            vector /= np.linalg.norm(vector)
        rows.append(
            Memory(
                user=user,
                character=character,
                kind=seeds[source][0],
                content=text,
                content_hash=text_hash(text),
                embedding=vector.tolist(),
                embedding_model=config.key,
                embedding_dim=len(vector),
                source_instance=WORLD,
            )
        )
        if len(rows) == 5000:
            Memory.objects.bulk_create(rows)
            rows = []
    Memory.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    return user, character, (embed_s, time.perf_counter() - started)


def _reset_world(user, character) -> None:
    """Back to the world as built: what earlier runs added goes, what they retired comes back."""
    from apps.memories.models import ConsolidationCounter, Decision, LifecycleJob, Memory, Status

    Memory.objects.filter(character=character).exclude(source_instance=WORLD).delete()
    Memory.objects.filter(character=character, status=Status.RETIRED).update(
        status=Status.ACTIVE, retired_reason="", superseded_by=None, valid_to=None
    )
    Decision.objects.filter(user=user).delete()
    LifecycleJob.objects.filter(user=user).delete()
    ConsolidationCounter.objects.filter(user=user).delete()


def measure_throughput(size: int, batch: int, server, rebuild: bool, *, consolidate: bool, exact: bool) -> dict:
    from django.conf import settings
    from django.test import override_settings

    from apps.memories.embeddings import config_for, text_hash
    from apps.memories.models import EmbeddingCache, LifecycleJob, Memory
    from apps.memories.services.lifecycle import classify, jobs, judge
    from apps.memories.services.lifecycle.classify import Candidate, memories_submit

    user, character, built = build_world(size, rebuild)
    connection = _connection(user, server, "B")
    _reset_world(user, character)
    planned = batch_candidates(size, batch)
    candidates = [Candidate(kind=kind, content=content) for _, kind, content in planned]
    EmbeddingCache.objects.filter(
        model=config_for(user).key, content_hash__in=[text_hash(c.content) for c in candidates]
    ).delete()
    lifecycle = dict(settings.LOREKEEPER_LIFECYCLE)
    if not consolidate:  # counters that never reach their thresholds
        lifecycle["consolidation"] = {**lifecycle["consolidation"], "thresholds": dict.fromkeys(KINDS, 10**9)}
    if exact:  # neighbours by exact scan whatever the scope's size, to check what HNSW misses
        lifecycle["exact_max"] = 10**9
    totals: dict[str, float] = defaultdict(float)
    server.requests.clear()
    with (
        override_settings(LOREKEEPER_LIFECYCLE=lifecycle),
        timed(classify, "_embed", totals, "embed"),
        timed(judge, "ask_model", totals, "ask"),
        timed(jobs, "consolidation_run", totals, "consolidate"),
    ):
        started = time.perf_counter()
        results = memories_submit(user=user, candidates=candidates, character=character, connection=connection)
        elapsed = time.perf_counter() - started
    by_type: dict[str, Counter] = defaultdict(Counter)
    surprises = []  # a state change or a new person's fact taken for a duplicate
    for (planned_as, _, content), result in zip(planned, results, strict=True):
        by_type[planned_as][result.outcome] += 1
        if result.outcome == "rejected" and planned_as != "duplicate":
            surprises.append((planned_as, content, result.related.content, result.decision.reason))
    jobs_run = LifecycleJob.objects.filter(user=user)
    return {
        "size": size,
        "built": built,
        "consolidate": consolidate,
        "exact": exact,
        "decided": [
            (c.content, r.outcome, r.related.content if r.related else None, r.decision.scores.get("same_kind"))
            for c, r in zip(candidates, results, strict=True)
        ],
        "candidates": batch,
        "seconds": elapsed,
        "per_s": batch / elapsed,
        "per_s_no_embed": batch / (elapsed - totals["embed"]),
        "totals": dict(totals),
        "by_type": by_type,
        "surprises": surprises,
        "outcomes": Counter(r.outcome for r in results),
        "questions": len(server.prompts(SUPERSESSION_ASK)),
        "passes": jobs_run.count(),
        "passes_failed": jobs_run.exclude(state=LifecycleJob.State.DONE).count(),
        "table_rows": Memory.objects.count(),
    }


def print_throughput(row: dict, *, verbose: bool) -> None:
    t = row["totals"]
    rest = row["seconds"] - t.get("embed", 0) - t.get("ask", 0) - t.get("consolidate", 0)
    share = 100 / row["seconds"]
    run = ("on" if row["consolidate"] else "off") + (", exact scan" if row["exact"] else "")
    print(
        f"{row['size']:>9,} {run:>17} {row['candidates']:>6} "
        f"{row['seconds']:>8.2f} {row['per_s']:>7.1f} {row['per_s_no_embed']:>10.1f}   "
        f"embed {t.get('embed', 0) * share:4.1f}%  ask {t.get('ask', 0) * share:4.1f}%  "
        f"consolidate {t.get('consolidate', 0) * share:4.1f}%  search+write {rest * share:4.1f}%"
    )
    outcomes = "; ".join(
        f"{kind} " + ", ".join(f"{o} {n}" for o, n in sorted(counts.items()))
        for kind, counts in row["by_type"].items()
    )
    print(f"{'':>10}outcomes by candidate: {outcomes}")
    print(
        f"{'':>10}{row['questions']} supersession questions, {row['passes']} consolidation passes "
        f"({row['passes_failed']} not done)"
    )
    for planned_as, content, related, reason in row["surprises"] if verbose else ():
        print(f"{'':>12}{planned_as} rejected: {content!r} as {related!r} [{reason}]")


def run_throughput(args, server) -> list[dict]:
    from django.conf import settings

    exact_max = settings.LOREKEEPER_LIFECYCLE["exact_max"]
    print(
        f"Classification throughput: {args.batch} candidates per run through memories_submit, the scripted model "
        'answering at once (INDEPENDENT; consolidation {"merges": []}).\n'
        "Consolidation off: thresholds out of reach. On: default thresholds, and Celery is eager in the test "
        "settings, so every pass a counter queues runs inline,\ninside the measured time. Vectors are computed in "
        "the run (cache emptied for the batch), one candidate at a time as in production. Neighbours: exact scan\n"
        f"up to {exact_max:,} memories of the compared kinds, HNSW past that; where HNSW is used, one more run "
        "with exact scans tells what it changed."
    )
    print(
        f"{'memories':>9} {'consolidation':>17} {'batch':>6} {'seconds':>8} {'cand/s':>7} {'w/o embed':>10}   "
        "share of the time"
    )
    rows = []
    for size in args.sizes:
        hnsw = size / len(KINDS) > exact_max
        plan = [(False, False), (True, False)] + ([(False, True)] if hnsw else [])
        for n, (consolidate, exact) in enumerate(plan):
            row = measure_throughput(
                size, args.batch, server, args.rebuild and n == 0, consolidate=consolidate, exact=exact
            )
            if row["built"]:
                embed_s, total_s = row["built"]
                print(f"{'':>10}(world of {size:,} built in {total_s:.0f} s, {embed_s:.0f} s of it embedding)")
            print_throughput(row, verbose=args.verbose)
            rows.append(row)
        if hnsw:
            by_hnsw, by_scan = rows[-3]["decided"], rows[-1]["decided"]
            differ = [(a, b) for a, b in zip(by_hnsw, by_scan, strict=True) if a[1:3] != b[1:3]]
            rows[-1]["agreement"] = 1 - len(differ) / len(by_scan)
            print(
                f"{'':>10}HNSW and exact scan: the same outcome and memory for {len(by_scan) - len(differ)} of "
                f"{len(by_scan)} candidates"
            )
            for (content, outcome, related, sim), (_, outcome2, related2, sim2) in differ if args.verbose else ():
                print(f"{'':>12}{content!r}: HNSW {outcome} {sim} {related!r}, exact {outcome2} {sim2} {related2!r}")
    print(
        f"{'':>10}table: {rows[-1]['table_rows']:,} memories in the bench database; load average "
        f"{os.getloadavg()[0]:.2f} (2 cores, shared)"
    )
    return rows


# --- 2. duplicate detection ----------------------------------------------------------------------------------------


def labelled_pairs(seed: int = 11, facts_max: int | None = None) -> list[tuple[str, str, str]]:
    """(first, second, label), label one of LABELS: every fact with each paraphrase, its state change, its
    independent same-topic fact, and one unrelated pair (the fact and a paraphrase of another fact, drawn by
    `seed`)."""
    from bench.lifecycle_pairs import FACTS

    facts = [*FACTS, *MORE_FACTS][:facts_max]
    rng = random.Random(seed)
    pairs = []
    for fact, para1, para2, change, independent in facts:
        pairs += [(fact, para1, "duplicate"), (fact, para2, "duplicate"), (fact, change, "state_change")]
        pairs.append((fact, independent, "independent"))
    for i, row in enumerate(facts):
        other = facts[rng.choice([k for k in range(len(facts)) if k != i])]
        pairs.append((row[0], other[rng.choice((1, 2))], "unrelated"))
    return pairs


_ASKED = re.compile(r"Old memory: (?P<old>.*?)\n\nNew memory: (?P<new>.*?)\n\nAnswer", re.DOTALL)
RIGHT_ANSWER = {"duplicate": "DUPLICATE", "state_change": "UPDATE", "independent": "INDEPENDENT"}


def _model_answering_right(pairs: list[tuple[str, str, str]]):
    """A scripted reply that answers each supersession question as its pair's label says."""
    from tests.llm_server import Reply

    answers = {(first, second): RIGHT_ANSWER.get(label, "INDEPENDENT") for first, second, label in pairs}

    def reply(prompt: str) -> Reply:
        match = _ASKED.search(prompt)
        return Reply(answers.get((match["old"], match["new"]), "INDEPENDENT") if match else "INDEPENDENT")

    return reply


def measure_detection(name: str, server, pairs, *, profile: str, embeddings: bool, right: bool) -> dict:
    from apps.chats.models import Character
    from apps.memories.services.lifecycle.classify import Candidate, memories_submit
    from apps.memories.services.settings import embedding_settings_set

    user = _user(f"bench_dup_{name}")
    Character.objects.filter(user=user).delete()
    embedding_settings_set(user=user, provider="local" if embeddings else "none")
    connection = _connection(user, server, profile)
    if right:
        server.on(lambda prompt: SUPERSESSION_ASK in prompt, _model_answering_right(pairs))
    rows = []
    started = time.perf_counter()
    try:
        for first, second, label in pairs:
            character = Character.objects.create(user=user, name="Pair")
            memories_submit(
                user=user, candidates=[Candidate("fact", first)], character=character, connection=connection
            )
            [result] = memories_submit(
                user=user, candidates=[Candidate("fact", second)], character=character, connection=connection
            )
            similarity = result.decision.scores.get("same_kind")
            rows.append((label, result.outcome, similarity, first, second, result.decision.reason))
    finally:
        if right:
            server.rules.pop(0)
    elapsed = time.perf_counter() - started
    confusion: dict[str, Counter] = {label: Counter() for label in LABELS}
    for label, outcome, *_ in rows:
        confusion[label][outcome] += 1
    tp = confusion["duplicate"]["rejected"]
    fp = sum(c["rejected"] for label, c in confusion.items() if label != "duplicate")
    fn = confusion["duplicate"].total() - tp
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "confusion": confusion, "rows": rows, "s": elapsed}


def print_detection(title: str, result: dict, *, verbose: bool, similarities: bool) -> None:
    print(
        f"{title:<38} precision {result['precision']:.3f}  recall {result['recall']:.3f}  F1 {result['f1']:.3f}  "
        f"({result['s']:.1f} s)"
    )
    for label in LABELS:
        counts = result["confusion"][label]
        line = "  ".join(f"{o} {counts[o]:>2}" for o in OUTCOMES)
        extra = ""
        sims = [s for lab, _, s, *_ in result["rows"] if lab == label and s is not None]
        if similarities and sims:
            q = statistics.quantiles(sims, n=10) if len(sims) > 1 else sims * 9
            extra = (
                f"   similarity (n {len(sims)}) min {min(sims):.2f} p10 {q[0]:.2f} "
                f"median {statistics.median(sims):.2f} p90 {q[-1]:.2f} max {max(sims):.2f}"
            )
        print(f"    {label:<13} {counts.total():>3}:  {line}{extra}")
    if verbose:
        for label, outcome, similarity, first, second, reason in result["rows"]:
            wrong = (label == "duplicate") != (outcome == "rejected")
            if wrong or (label == "state_change" and outcome != "superseded"):
                sim = f"{similarity:.3f}" if similarity is not None else "  -  "
                print(f"      {label:<12} -> {outcome:<13} {sim}  {first!r} -> {second!r}  [{reason}]")


DETECTION_RUNS = (  # key, title, profile, embeddings, model answering right
    ("B", "profile B, embeddings", "B", True, False),
    ("A", "profile A, embeddings", "A", True, False),
    ("jaccard", "profile B, Jaccard (embeddings off)", "B", False, False),
    ("B_right", "profile B, embeddings, model right", "B", True, True),
)


def run_detection(args, server) -> dict[str, dict]:
    from django.conf import settings

    limits = settings.LOREKEEPER_LIFECYCLE["thresholds"]
    pairs = labelled_pairs(args.seed, args.facts)
    counts = Counter(label for *_, label in pairs)
    print(
        f"\nDuplicate detection: {len(pairs)} labelled pairs ("
        + ", ".join(f"{counts[label]} {label}" for label in LABELS)
        + "); predicted duplicate = the second one rejected.\nThe scripted model answers INDEPENDENT to every "
        "same-topic question, except in the 'model right' run; similarity is the best same-kind neighbour's."
    )
    detection = {}
    for key, title, profile, embeddings, right in DETECTION_RUNS:
        detection[key] = measure_detection(key, server, pairs, profile=profile, embeddings=embeddings, right=right)
        t = limits[profile]["embedding" if embeddings else "jaccard"]
        detection[key]["title"] = f"{title} (duplicate {t['duplicate']}, same topic {t['same_topic']})"
        print_detection(
            detection[key]["title"], detection[key], verbose=args.verbose, similarities=key in ("B", "jaccard")
        )
    return detection


# --- main ----------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--rebuild", action="store_true", help="Build the worlds again.")
    parser.add_argument("--only", choices=["throughput", "detection"])
    parser.add_argument("--seed", type=int, default=11, help="Draws the unrelated pairs.")
    parser.add_argument("--verbose", action="store_true", help="List the misjudged pairs.")
    parser.add_argument("--facts", type=int, help="Only the first N facts of the labelled pairs (a small run).")
    args = parser.parse_args()
    _setup_django()
    from apps.memories.embeddings import config_for, embed_texts, text_hash
    from apps.memories.models import EmbeddingCache
    from tests.llm_server import start_llm_server

    config = config_for(_user("bench_warm"))
    if config.key != "local:all-MiniLM-L6-v2":
        sys.exit(f"needs the local all-MiniLM-L6-v2 deployment model, found {config.key!r}")
    warm = "The model is loaded before anything is timed."
    EmbeddingCache.objects.filter(model=config.key, content_hash=text_hash(warm)).delete()
    embed_texts(config, [warm])
    server = start_llm_server()
    server.on(SUPERSESSION_ASK, "INDEPENDENT")
    server.on(CONSOLIDATION_ASK, '{"merges": []}')
    throughput, detection = [], {}
    try:
        if args.only != "detection":
            throughput = run_throughput(args, server)
        if args.only != "throughput":
            detection = run_detection(args, server)
    finally:
        server.stop()
    print_summary(throughput, detection, args.batch)
    failed = sum(row["passes_failed"] for row in throughput)
    if failed:  # a broken run, not a figure: its consolidation timings measured failures
        raise SystemExit(f"{failed} consolidation passes not done")


def print_summary(throughput: list[dict], detection: dict, batch: int) -> None:
    print("\n== Figures (bench/lifecycle.py) ==")
    for row in throughput:
        if row["exact"]:
            print(
                f"classification, {row['size']:>7,} memories, exact scan instead of HNSW: {row['per_s']:5.1f} cand/s; "
                f"same outcome as with HNSW for {100 * row['agreement']:.1f}% of candidates"
            )
            continue
        topic = row["by_type"]["topic"]
        print(
            f"classification, {row['size']:>7,} memories of one character, consolidation "
            f"{'on ' if row['consolidate'] else 'off'}: {row['per_s']:5.1f} cand/s "
            f"({row['per_s_no_embed']:5.1f} without embedding; batch of {batch}); "
            f"same-topic candidates taken for duplicates {topic['rejected']}/{topic.total()}"
        )
    for result in detection.values():
        confusion = result["confusion"]
        wrongly = ", ".join(
            f"{label} {confusion[label]['rejected']}/{confusion[label].total()}" for label in LABELS[1:3]
        )
        print(
            f"duplicate detection, {result['title']}: precision {result['precision']:.3f}, recall "
            f"{result['recall']:.3f}, F1 {result['f1']:.3f}; rejected as duplicates: {wrongly}"
        )


# (fact, paraphrase, paraphrase, state change, independent fact on the same topic): added to bench/lifecycle_pairs.py
# so that the set holds over 60 state changes. Several state changes carry none of the classifier's cue words
# ("sold", "has learned to read", "made peace"), and one paraphrase carries one ("married"): the cases a wording
# rule alone gets wrong.
MORE_FACTS = [
    (
        "Perrin is the ferryman on the Greywater crossing.",
        "Perrin runs the ferry across the Greywater.",
        "Anyone crossing the Greywater pays Perrin, who works the ferry there.",
        "Perrin sold his ferry and now guides caravans through the hills.",
        "Perrin's ferry on the Greywater can carry two horses at a time.",
    ),
    (
        "Odette sings at the Gilded Swan every night.",
        "Every night Odette performs songs at the Gilded Swan.",
        "The Gilded Swan has Odette as its nightly singer.",
        "Odette lost her voice to a fever and has not sung at the Gilded Swan since.",
        "Odette's songs at the Gilded Swan are mostly old sailor ballads.",
    ),
    (
        "Brannoc keeps bees behind the chapel.",
        "Behind the chapel, Brannoc tends his beehives.",
        "Brannoc is the beekeeper whose hives stand behind the chapel.",
        "A frost killed all of Brannoc's bees, and the hives behind the chapel stand empty.",
        "Brannoc sells the honey from his chapel hives at the Thursday market.",
    ),
    (
        "Yara cannot read.",
        "Yara never learned to read.",
        "Reading is something Yara is unable to do.",
        "Yara has learned to read with Elara's help.",
        "Yara hides from the guild that she cannot read.",
    ),
    (
        "The Duke of Merrow is at war with the river clans.",
        "The river clans and the Duke of Merrow are fighting a war.",
        "War rages between the Duke of Merrow and the clans of the river.",
        "The Duke of Merrow made peace with the river clans at the autumn council.",
        "The Duke of Merrow's war with the river clans began over fishing rights.",
    ),
    (
        "Cassia wears her late mother's ring on a chain around her neck.",
        "Around her neck Cassia wears a chain holding her dead mother's ring.",
        "Cassia keeps the ring that belonged to her late mother on a neck chain.",
        "Cassia pawned her late mother's ring to pay the physician.",
        "Cassia's late mother's ring is set with a small garnet.",
    ),
    (
        "Fenwick is Lord Aubrey's steward.",
        "Lord Aubrey employs Fenwick as his steward.",
        "Fenwick manages Lord Aubrey's household as its steward.",
        "Lord Aubrey dismissed Fenwick, who is no longer his steward.",
        "Fenwick keeps Lord Aubrey's accounts in a locked iron box.",
    ),
    (
        "Juniper is terrified of the dark.",
        "Juniper has a deep fear of darkness.",
        "The dark scares Juniper badly.",
        "Juniper has outgrown her fear of the dark.",
        "Juniper sleeps with a candle burning because she fears the dark.",
    ),
    (
        "The east gate of the city is closed at sunset.",
        "At sunset the guards shut the city's east gate.",
        "Nobody passes the city's east gate after sundown, when it is shut.",
        "Since the curfew was lifted, the east gate stays open all night.",
        "The east gate of the city is the oldest of the four gates.",
    ),
    (
        "Torvald is the best archer in the company.",
        "No one in the company shoots a bow better than Torvald.",
        "Torvald is the company's finest archer.",
        "Torvald injured his hand and can no longer draw a bow.",
        "Torvald fletches his own arrows with grey goose feathers.",
    ),
    (
        "Astrid and Kell are sworn enemies.",
        "Kell and Astrid hate each other and have sworn to be enemies.",
        "Astrid has sworn enmity against Kell, and he against her.",
        "Astrid and Kell made peace after the siege and are now close friends.",
        "Astrid and Kell became enemies over a stolen horse.",
    ),
    (
        "Marek drinks too much.",
        "Marek has a drinking problem.",
        "Marek is far too fond of the bottle.",
        "Marek has been sober for a year now.",
        "Marek drinks mostly cheap plum brandy.",
    ),
    (
        "The Silver Stag tavern burned down.",
        "Fire destroyed the Silver Stag tavern.",
        "The Silver Stag tavern was lost to a fire and nothing is left of it.",
        "The Silver Stag tavern has been rebuilt on its old foundations.",
        "The fire at the Silver Stag tavern started in the kitchen.",
    ),
    (
        "Pell is apprenticed to the royal cartographer.",
        "The royal cartographer has taken Pell on as an apprentice.",
        "Pell is learning mapmaking as the royal cartographer's apprentice.",
        "Pell quit his apprenticeship with the royal cartographer.",
        "Pell sleeps in the attic above the royal cartographer's workshop.",
    ),
    (
        "Rosalind owes the moneylender forty crowns.",
        "Rosalind is forty crowns in debt to the moneylender.",
        "The moneylender is owed forty crowns by Rosalind.",
        "Rosalind paid off her forty-crown debt to the moneylender.",
        "The moneylender charges Rosalind interest every new moon.",
    ),
    (
        "Eamon is blind in his left eye.",
        "Eamon's left eye is blind.",
        "Eamon cannot see out of his left eye.",
        "A healer restored the sight in Eamon's left eye.",
        "Eamon wears a leather patch over his blind left eye.",
    ),
    (
        "The well in Ashford square is poisoned.",
        "Someone has poisoned the well in the square at Ashford.",
        "Poison has fouled the Ashford square well.",
        "The Ashford square well was cleansed and its water is safe to drink again.",
        "The Ashford square well is the only water for the lower town.",
    ),
    (
        "Quinn serves in the queen's guard.",
        "Quinn is a member of the queen's guard.",
        "Quinn is one of the soldiers who guard the queen.",
        "Quinn was expelled from the queen's guard for desertion.",
        "Quinn wears the blue sash of the queen's guard.",
    ),
    (
        "Hollis believes his brother is still alive.",
        "Hollis is convinced his brother did not die.",
        "Hollis thinks that his brother is alive somewhere.",
        "Hollis found his brother's grave and accepts that he is dead.",
        "Hollis searches the prison rolls for his brother every month.",
    ),
    (
        "The Academy forbids the study of necromancy.",
        "Necromancy is banned at the Academy.",
        "Studying necromancy is not allowed at the Academy.",
        "The Academy lifted its ban on necromancy.",
        "The Academy's ban on necromancy dates back to the plague years.",
    ),
    (
        "Imogen is Roderick's wife.",
        "Roderick is married to Imogen.",
        "Imogen and Roderick are husband and wife.",
        "Imogen left Roderick and lives with her sister in the south.",
        "Imogen met Roderick when she was sixteen.",
    ),
    (
        "Gwen runs a bakery on Candle Lane.",
        "The bakery on Candle Lane is Gwen's.",
        "Gwen bakes and sells bread from her shop on Candle Lane.",
        "Gwen moved her bakery from Candle Lane to the harbour market.",
        "Gwen's Candle Lane bakery is known for its rye loaves.",
    ),
    (
        "Sir Edric is loyal to the crown.",
        "Sir Edric's loyalty lies with the crown.",
        "The crown can count on Sir Edric's loyalty.",
        "Sir Edric has turned traitor and joined the rebels.",
        "Sir Edric swore loyalty to the crown on his father's sword.",
    ),
    (
        "Nim has a pet raven named Smudge.",
        "Smudge is Nim's pet raven.",
        "Nim keeps a raven called Smudge as a pet.",
        "Nim's raven Smudge flew away and never came back.",
        "Nim's raven Smudge can say three words.",
    ),
    (
        "The mines of Karth are out of silver.",
        "No silver is left in the mines of Karth.",
        "The silver in Karth's mines is exhausted.",
        "Miners struck a new vein of silver in the mines of Karth.",
        "The mines of Karth once employed half the town.",
    ),
    (
        "Ysolde is the high priestess of the moon temple.",
        "The moon temple's high priestess is Ysolde.",
        "Ysolde leads the moon temple as its high priestess.",
        "Ysolde resigned as high priestess of the moon temple.",
        "Ysolde, high priestess of the moon temple, fasts on every new moon.",
    ),
    (
        "Lucan studies swordplay with an old duelist named Vesk.",
        "An old duelist called Vesk teaches Lucan the sword.",
        "Lucan is learning swordplay from Vesk, an aging duelist.",
        "Vesk died, and Lucan trains alone.",
        "Vesk makes Lucan practise his sword drills at dawn.",
    ),
    (
        "Oona is hiding from the inquisitors in the bell tower.",
        "Oona has taken refuge from the inquisitors in the bell tower.",
        "The bell tower is where Oona hides from the inquisitors.",
        "The inquisitors found Oona in the bell tower and took her away.",
        "The sexton arranged Oona's hiding place in the bell tower.",
    ),
]


if __name__ == "__main__":
    main()
