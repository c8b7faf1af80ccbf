"""memory_search latency and HNSW recall at 10k, 100k (and 1M) memories of one user among many.

    .venv/bin/python bench/memory_search.py [--sizes 10000 100000 [1000000]] [--seed 7] [--rebuild] [--explain]
    .venv/bin/python bench/memory_search.py --drop 1000000      # take a size's rows out of the table again
    .venv/bin/python bench/memory_search.py --isolation [--isolation-size 10000] [--isolation-others 200000 2000000]
    [--own-index-min N]     # a user's own HNSW index from N vectors (LOREKEEPER_SEARCH_OWN_INDEX_MIN, 50,000)

--isolation (issue 22): the same user in two databases of its own, among 0.2 M and among 2 M rows of other users,
each world built and measured as below in a child process; prints the user's search p50/p95 in each and, as its
last line, `isolation: p95 X ms among 0.2M, Y ms among 2M, ratio R`.

Data (generated, kept in its own database `lorekeeper_bench_search` and reused while size, seed and ratio match):
for each size a "world" of one target user holding SIZE memories and 24 other users holding SIZE x --others-ratio
between them, rows interleaved in the heap as many users' writes would leave them. All worlds share the table, so a
target user also sits among the other worlds' users (the table's size is printed). Vectors are 384-dim and
clustered like real ones: the centroids are the real all-MiniLM-L6-v2 vectors of the 3,435 LoCoMo development
turns (embedded once, then read from the embedding cache), each memory a centroid plus Gaussian noise (cosine
0.6-0.9 to it), normalised. Texts are that turn's words (70% of them) plus words drawn by their LoCoMo frequency, a
name now and then and a rare made-up word, so the full-text side has realistic work. Rows go in by binary COPY with
the full-text GIN and the HNSW index dropped; both are then rebuilt over the whole table (HNSW with
maintenance_work_mem holding the graph, one parallel worker), and the build times are printed.

Measured per size, for the target user, with the deployment's embedding model (the real local model):
- HNSW recall@10 against exact KNN on 50 LoCoMo questions, through search's own `vector_candidates`: as it
  runs (its choice between the exact scan and HNSW, then the planner's), with HNSW forced (enable_sort off), and
  exact (index scans off); LIMIT is the search's k, top 10 after its re-sort. One untimed pass warms the caches.
  HNSW again at the --extra-ef values of ef_search, for comparison with the deployment's.
- The text ranking's approximation on a scope past `text_sample` rows: how much of the exact ranking's top 10
  (every matching row scored) it keeps on 20 of the queries below, and both p50 times.
- `memory_search` of 150 queries of 5 other questions each, after 5 warm-ups, query cache emptied first: p50/p95 of
  its own `embed` and `search` timings, and of the time it spent in its scope count, vector and text candidates.
- What the planner chose for each statement of one `memory_search` (EXPLAIN ANALYZE), with its time.

Targets (issue 4): recall@10 >= 0.95 at each size, search p95 < 50 ms at 100,000; 1,000,000 built in 30 minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "benchmarks" / "locomo" / "locomo-dev6.json"
DIM = 384
OTHER_USERS = 24
QUERIES, WARMUPS, SENTENCES, RECALL_QUERIES, TEXT_QUERIES = 150, 5, 5, 50, 20
BATCH = 20_000
REBUILT_INDEXES = ("memory_own_words_gin", f"memory_embedding_{DIM}_hnsw")
KINDS = {"fact": 30, "event": 25, "relationship": 10, "preference": 10, "detail": 10, "scene": 5, "state": 5}
SYLLABLES = "ka lo mi ra ven dor eth ul sa quin bri tho zel mar ix ae no fen gal ri sto vu ny pel".split()
_WORD = re.compile(r"[\w']+")
STATE_TABLE = """CREATE TABLE IF NOT EXISTS bench_memory_search (
    size bigint PRIMARY KEY, seed int NOT NULL, others_ratio float8 NOT NULL, total_rows bigint NOT NULL,
    load_s float8 NOT NULL, gin_s float8 NOT NULL, hnsw_s float8 NOT NULL, vacuum_s float8 NOT NULL,
    table_rows bigint NOT NULL, built_at timestamptz NOT NULL DEFAULT now())"""


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("LOREKEEPER_DATABASE_NAME", "lorekeeper_bench_search")
    # Connections from a pool, as `make run` serves (config/asgi.py): search's text ranking runs beside on one.
    os.environ.setdefault("DATABASE_POOL", "4")
    import django

    from apps.common import embedded

    embedded.postgres_start()  # reading the settings starts nothing
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


# --- generated data ----------------------------------------------------------------------------------------------


class Corpus:
    """LoCoMo's turns (cluster topics), word frequencies and questions, plus made-up names and rare words."""

    def __init__(self, path: Path, seed: int) -> None:
        self.turns: list[str] = []
        self.questions: list[str] = []
        names: set[str] = set()
        for sample in json.loads(path.read_text()):
            conversation = sample["conversation"]
            names |= {conversation["speaker_a"], conversation["speaker_b"]}
            session = 1
            while f"session_{session}_date_time" in conversation:
                self.turns += [turn["text"] for turn in conversation.get(f"session_{session}") or []]
                session += 1
            self.questions += [qa["question"].strip() for qa in sample["qa"] if qa.get("question")]
        self.questions = list(dict.fromkeys(q for q in self.questions if q))
        random.Random(seed).shuffle(self.questions)
        self.turn_words = [_WORD.findall(turn) for turn in self.turns]
        counts = Counter(word.lower() for words in self.turn_words for word in words)
        self.vocabulary = list(counts)
        self.cumulative = np.cumsum([counts[word] for word in self.vocabulary]).tolist()
        rng = random.Random(seed)
        self.names = sorted(names) + ["".join(rng.choices(SYLLABLES, k=rng.randint(2, 3))).title() for _ in range(300)]
        self.rare = ["".join(rng.choices(SYLLABLES, k=rng.randint(3, 5))) for _ in range(20_000)]

    def text(self, rng: random.Random, cluster: int) -> str:
        words = [word for word in self.turn_words[cluster] if rng.random() < 0.7]
        words += rng.choices(self.vocabulary, cum_weights=self.cumulative, k=rng.randint(3, 15))
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words) + 1), rng.choice(self.names))
        if rng.random() < 0.1:
            words.insert(rng.randrange(len(words) + 1), rng.choice(self.rare))
        return " ".join(words) + "."


def _centroids(corpus: Corpus, config) -> np.ndarray:
    from apps.memories.embeddings import embed_texts

    started = time.perf_counter()
    vectors = np.asarray(embed_texts(config, corpus.turns), dtype=np.float32)
    print(f"centroids: {len(vectors)} LoCoMo turns, embedded or from the cache, {time.perf_counter() - started:.1f} s")
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _world_users(size: int, seed: int, ratio: float) -> list[tuple[int, int, int]]:
    """(user id, character id, memories) of the target user first, then of the others, each with one character."""
    from django.contrib.auth import get_user_model

    from apps.chats.models import Character
    from apps.memories.models import Entity

    rng = random.Random(f"{seed}:{size}:users")
    others = round(size * ratio)
    shares = [others // OTHER_USERS + (i < others % OTHER_USERS) for i in range(OTHER_USERS)]
    users = []
    for i, count in enumerate([size, *shares]):
        user = get_user_model().objects.create_user(username=_username(size, i))
        character = Character.objects.create(user=user, name=f"Character {i}")
        if i == 0:  # something for the search's entity lookup to read
            Entity.objects.bulk_create(
                Entity(user=user, character=character, name=f"{rng.choice(SYLLABLES).title()}{n}") for n in range(40)
            )
        users.append((user.pk, character.pk, count))
    return users


def _username(size: int, i: int) -> str:
    return f"search-{size}" if i == 0 else f"search-{size}-{i:02d}"


COLUMNS = {
    "user_id": "int4",
    "character_id": "int8",
    "kind": "varchar",
    "content": "text",
    "content_hash": "varchar",
    "data": "jsonb",
    # pgvector's binary form (dimension, unused, big-endian float4s) built here with numpy; the server reads the
    # field as the column's type, bytea only tells psycopg to send the bytes as they are.
    "embedding": "bytea",
    "embedding_model": "varchar",
    "embedding_dim": "int2",
    "importance": "int2",
    "confidence": "float8",
    "unconfirmed_count": "int4",
    "time_scope": "varchar",
    "status": "varchar",
    "retired_reason": "varchar",
    "source_message_indices": "int4[]",
    "source_instance": "varchar",
    "participating_instances": "varchar[]",
    "created_at": "timestamptz",
    "updated_at": "timestamptz",
    "version": "int4",
    # Sync's columns that may not be empty (apps/common/models.py Synced): the feed trigger reads them.
    "uid": "uuid",
    "clock": "jsonb",
    "changed_by": "varchar",
    "edited_by": "varchar",
    "origin": "varchar",
}


def _copy_world(cursor, *, size: int, seed: int, ratio: float, corpus: Corpus, centroids: np.ndarray) -> int:
    from psycopg.types.json import Jsonb

    users = _world_users(size, seed, ratio)
    rng = random.Random(f"{seed}:{size}")
    generator = np.random.default_rng([seed, size])
    # Interleaved as many users writing over two years would leave them in the heap.
    owners = generator.permutation(np.repeat(np.arange(len(users)), [count for _, _, count in users]))
    start, step = datetime.now(UTC) - timedelta(days=730), timedelta(days=730) / len(owners)
    kinds, kind_weights = list(KINDS), list(KINDS.values())
    key = _config().key
    header, empty = np.array([DIM, 0], dtype=">u2").tobytes(), Jsonb({})
    with cursor.copy(f"COPY memories_memory ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(COLUMNS.values()))
        for offset in range(0, len(owners), BATCH):
            batch = owners[offset : offset + BATCH]
            clusters = generator.integers(0, len(centroids), len(batch))
            noise = generator.standard_normal((len(batch), DIM), dtype=np.float32)
            vectors = centroids[clusters] + generator.uniform(0.025, 0.065, (len(batch), 1)).astype(np.float32) * noise
            vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(">f4")
            for i, (owner, cluster) in enumerate(zip(batch.tolist(), clusters.tolist(), strict=True)):
                user_id, character_id, _ = users[owner]
                content = corpus.text(rng, cluster)
                moment = start + step * (offset + i)
                kind = rng.choices(kinds, kind_weights)[0]
                digest = hashlib.sha256(content.encode()).hexdigest()
                importance, confidence = rng.randint(1, 3), round(rng.uniform(0.5, 1.0), 2)
                copy.write_row(
                    (user_id, character_id, kind, content, digest, empty, header + vectors[i].tobytes(), key, DIM)
                    + (importance, confidence, 0, "", "active", "", [], "", [], moment, moment, 1)
                    + (uuid.UUID(bytes=rng.randbytes(16), version=4), empty, "", "", "api")
                )
    return len(owners)


def _delete_worlds(cursor, sizes: list[int]) -> None:
    """Memories by raw SQL (the ORM's cascade would load a million of them into Python first), then the users."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(username__regex=rf"^search-({'|'.join(map(str, sizes))})(-[0-9]+)?$")
    cursor.execute("DELETE FROM memories_memory WHERE user_id = ANY(%s)", [list(users.values_list("pk", flat=True))])
    users.delete()
    cursor.execute("DELETE FROM bench_memory_search WHERE size = ANY(%s)", [sizes])


def _drop_search_indexes() -> None:
    """Drop the GIN and HNSW indexes for a bulk change, their definitions kept in the database until they are
    built again, so an interrupted run still gets them back. A delete with them in place would leave the dead rows
    in the HNSW graph, and VACUUM's repair of the graph takes longer than a build."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_memory_search_index (name, definition) SELECT indexname, indexdef FROM pg_indexes "
            "WHERE tablename = 'memories_memory' AND indexname = ANY(%s) ON CONFLICT DO NOTHING",
            [list(REBUILT_INDEXES)],
        )
        for name in REBUILT_INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


def _build_search_indexes() -> dict[str, float]:
    from django.db import connection

    built: dict[str, float] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories_memory")
        rows = cursor.fetchone()[0]
        # The whole HNSW graph in memory (about 2.6 kB a 384-dim vector); past it pgvector builds far slower.
        cursor.execute(f"SET maintenance_work_mem = '{min(rows * 2600 // 2**20 + 256, 12288)}MB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")  # plus the leader: both cores
        cursor.execute("SELECT name, definition FROM bench_memory_search_index")
        for name, definition in sorted(cursor.fetchall(), key=lambda row: REBUILT_INDEXES.index(row[0])):
            started = time.perf_counter()
            cursor.execute(definition)
            cursor.execute("DELETE FROM bench_memory_search_index WHERE name = %s", [name])
            built[name] = time.perf_counter() - started
            print(f"  {name} built over {rows:,} rows in {built[name]:.0f} s", flush=True)
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET max_parallel_maintenance_workers")
    return built


def _vacuum() -> float:
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")
    return time.perf_counter() - started


def _state() -> dict[int, tuple[int, float]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(STATE_TABLE)
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_memory_search_index (name text PRIMARY KEY, definition text)")
        cursor.execute("SELECT size, seed, others_ratio FROM bench_memory_search")
        return {size: (seed, ratio) for size, seed, ratio in cursor.fetchall()}


def drop_worlds(sizes: list[int]) -> None:
    from django.db import connection

    _state()
    _drop_search_indexes()
    with connection.cursor() as cursor:
        _delete_worlds(cursor, sizes)
    _vacuum()
    _build_search_indexes()


def ensure_worlds(*, sizes: list[int], seed: int, ratio: float, rebuild: bool, corpus: Corpus) -> dict:
    """Build the worlds missing or stale: indexes dropped, old rows deleted, each world copied in a transaction
    with its state row, indexes rebuilt over the whole table, VACUUM ANALYZE. Answer the state of every size."""
    from django.db import connection, transaction

    state = _state()
    missing = [size for size in sizes if rebuild or state.get(size) != (seed, ratio)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM bench_memory_search_index")
        interrupted = cursor.fetchone()[0] > 0
    if missing or interrupted:
        centroids = _centroids(corpus, _config())
        _drop_search_indexes()
        with connection.cursor() as cursor:
            _delete_worlds(cursor, missing)
        _vacuum()
        for size in missing:
            started = time.perf_counter()
            with transaction.atomic(), connection.cursor() as cursor:
                copied = _copy_world(
                    cursor.cursor, size=size, seed=seed, ratio=ratio, corpus=corpus, centroids=centroids
                )
                cursor.execute(
                    "INSERT INTO bench_memory_search (size, seed, others_ratio, total_rows, load_s, gin_s, hnsw_s, "
                    "vacuum_s, table_rows) VALUES (%s, %s, %s, %s, %s, 0, 0, 0, 0)",
                    [size, seed, ratio, copied, time.perf_counter() - started],
                )
            print(f"size {size:,}: generated and copied {copied:,} rows in {time.perf_counter() - started:.0f} s")
        built = _build_search_indexes()
        vacuum = _vacuum()
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE bench_memory_search SET gin_s = %s, hnsw_s = %s, vacuum_s = %s, "
                "table_rows = (SELECT count(*) FROM memories_memory) WHERE size = ANY(%s)",
                [*(built.get(name, 0) for name in REBUILT_INDEXES), vacuum, missing],
            )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT size, total_rows, load_s, gin_s, hnsw_s, vacuum_s, table_rows, built_at "
            "FROM bench_memory_search WHERE size = ANY(%s)",
            [sizes],
        )
        names = [column.name for column in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def _config():
    from apps.memories.embeddings import deployment_config

    return deployment_config()


# --- measurements ------------------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


class Explainer:
    """A connection.execute_wrapper running EXPLAIN ANALYZE on each SELECT before it runs: what the planner picked."""

    def __init__(self) -> None:
        self.statements: list[dict] = []

    def __call__(self, execute, sql, params, many, context):
        if not many and sql.lstrip("( ").upper().startswith(("SELECT", "WITH")):
            raw = context["cursor"].cursor
            raw.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
            plan = raw.fetchone()[0]
            plan = plan[0] if isinstance(plan, list) else json.loads(plan)[0]
            self.statements.append({"sql": sql, "plan": plan})
        return execute(sql, params, many, context)


def _label(sql: str) -> str:
    if "<=>" in sql:
        return "vector knn"
    if "ts_rank_cd" in sql:
        return "text rank"
    if "count(*)" in sql:
        return "text df" if "search_vector" in sql else "scope count"
    if "unnest(to_tsvector" in sql:
        return "lexemes"
    for table, label in (
        ("memories_embeddingsettings", "embed settings"),
        ("memories_embeddingcache", "embed cache"),
        ("memories_memory_entities", "graph"),
        ('"message_index" AS', "neighbours"),
    ):
        if table in sql:
            return label
    return "entities" if '"memories_entity"' in sql.split("WHERE")[0] else "rows"


def _scans(node: dict, found: Counter, filtered: Counter) -> None:
    kind = node["Node Type"]
    if "Scan" in kind or kind in ("Sort", "Incremental Sort"):
        name = f"{kind}({node['Index Name']})" if node.get("Index Name") else kind
        found[name] += 1
        filtered[name] += node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
    for child in node.get("Plans", []):
        _scans(child, found, filtered)


def describe(plan: dict) -> str:
    """Execution time and the scans of a plan: `Index Scan(x) x5 [-1200]` is five scans that fetched 1,200 rows
    their filter then threw away (the price of a filtered HNSW scan)."""
    found, filtered = Counter(), Counter()
    _scans(plan["Plan"], found, filtered)
    text = ", ".join(
        name + (f" x{n}" if n > 1 else "") + (f" [-{filtered[name]}]" if filtered[name] else "")
        for name, n in found.items()
    )
    jit = plan.get("JIT", {}).get("Timing", {}).get("Total")
    return f"{plan['Execution Time']:7.1f} ms  {text}" + (f"  [JIT {jit:.0f} ms]" if jit else "")


def _knn(scope, vector, *, k: int, path: str) -> tuple[list[int], float]:
    """search's own KNN for one vector along a path: the ids by similarity, and the milliseconds."""
    from django.conf import settings
    from django.db import connection, transaction

    from apps.memories.search.candidates import scope_size, vector_candidates

    overrides, settings_sql = PATHS[path]
    config = settings.LOREKEEPER_SEARCH
    saved = {key: config[key] for key in overrides}
    with transaction.atomic():
        with connection.cursor() as cursor:
            for statement in settings_sql:
                cursor.execute(statement)
        config.update(overrides)
        try:
            size = scope_size(scope)
            started = time.perf_counter()
            best = vector_candidates(scope, vectors=[vector], model_key=_config().key, k=k, size=size)
            elapsed = (time.perf_counter() - started) * 1000
        finally:
            config.update(saved)
    return sorted(best, key=lambda pk: (-best[pk], pk)), elapsed


# Path: (LOREKEEPER_SEARCH values for the call, none to leave search's choice; SET LOCALs before it).
PATHS = {
    "planner": ({}, ()),
    # The HNSW statement whatever the scope's size; no sort allowed, so only the ordered HNSW scan is left.
    "hnsw": ({"exact_max": -1, "hnsw_min_share": 0}, ("SET LOCAL enable_sort = off",)),
    # The exact scan (HNSW answers index scans only, so without them this is brute force in any version).
    "exact": ({"exact_max": 10**12}, ("SET LOCAL enable_indexscan = off",)),
}


def measure_recall(scope, vectors: list[list[float]], k: int, extra_ef: list[int]) -> dict:
    """One pass per path after an untimed one: the server's cache is cold after a restart, and pages unused for a
    while are reclaimed from the page cache on this machine. Then HNSW again at each of `extra_ef`."""
    from django.conf import settings

    for vector in vectors:
        _knn(scope, vector, k=k, path="planner")
    found, times = {}, {}
    for path in ("exact", "hnsw", "planner"):
        runs = [_knn(scope, vector, k=k, path=path) for vector in vectors]
        found[path], times[path] = [ids for ids, _ in runs], [ms for _, ms in runs]
    config = settings.LOREKEEPER_SEARCH
    default_ef = config["ef_search"]
    for ef in extra_ef:
        config["ef_search"] = ef
        try:
            runs = [_knn(scope, vector, k=k, path="hnsw") for vector in vectors]
        finally:
            config["ef_search"] = default_ef
        found[f"ef{ef}"], times[f"ef{ef}"] = [ids for ids, _ in runs], [ms for _, ms in runs]
    figures = {f"{path}_ms": (_pct(ms, 50), _pct(ms, 95)) for path, ms in times.items()}
    for path in found:
        pairs = list(zip(found[path], found["exact"], strict=True))
        figures[f"{path}_r10"] = np.mean([len(set(a[:10]) & set(e[:10])) / 10 for a, e in pairs])
        figures[f"{path}_rk"] = np.mean([len(set(a) & set(e)) / len(e) for a, e in pairs])
    figures["extra_ef"] = extra_ef
    return figures


def measure_text_approximation(scope, queries: list[str], k: int) -> dict:
    """On a scope past `text_sample` rows the text ranking reads only the rows holding the query's rarest words.
    How much of the exact ranking's top 10 (every matching row scored, frequencies counted over the whole scope)
    it keeps, and the two p50 times."""
    from django.conf import settings

    from apps.memories.search import candidates

    config = settings.LOREKEEPER_SEARCH
    size = candidates.scope_size(scope)
    rankings, times = {}, {}
    for name, sample in (("default", config["text_sample"]), ("exact", 10**12)):
        saved = config["text_sample"]
        config["text_sample"] = sample
        try:
            runs = []
            for query in queries:
                started = time.perf_counter()
                scores = candidates.text_candidates(scope, query=query, k=k, size=size)
                runs.append(((time.perf_counter() - started) * 1000, sorted(scores, key=lambda pk: (-scores[pk], pk))))
        finally:
            config["text_sample"] = saved
        times[name] = _pct([ms for ms, _ in runs], 50)
        rankings[name] = [ids for _, ids in runs]
    pairs = list(zip(rankings["default"], rankings["exact"], strict=True))
    possible = sum(min(len(e), 10) for e in rankings["exact"])
    kept = sum(len(set(a[:10]) & set(e[:10])) for a, e in pairs) / max(possible, 1)
    return {"overlap10": kept, "default_ms": times["default"], "exact_ms": times["exact"]}


@contextmanager
def _timing(functions: dict[str, object]) -> Iterator[dict[str, list[float]]]:
    """Time the calls memory_search makes to these functions, by name, each of the module it is called through
    (the split of its timings)."""
    spent: dict[str, list[float]] = {name: [] for name in functions}
    originals = {name: getattr(module, name) for name, module in functions.items()}

    def timed(name: str):
        def call(*args, **kwargs):
            started = time.perf_counter()
            try:
                return originals[name](*args, **kwargs)
            finally:
                spent[name].append((time.perf_counter() - started) * 1000)

        return call

    for name, module in functions.items():
        setattr(module, name, timed(name))
    try:
        yield spent
    finally:
        for name, original in originals.items():
            setattr(functions[name], name, original)


def measure_latency(user, queries: list[str]) -> dict:
    from apps.memories.embeddings import text_hash
    from apps.memories.models import EmbeddingCache
    from apps.memories.search import candidates, ranking

    config = _config()
    sentences = [s for query in queries for s in ranking.split_sentences(query, limit=SENTENCES)]
    # Cold query cache, as for a question never asked before.
    EmbeddingCache.objects.filter(model=config.key, content_hash__in=[text_hash(s) for s in sentences]).delete()
    embed, total, both, methods = [], [], [], Counter()
    # The scope's count and the text ranking run beside the embedding (candidates.counted_text_candidates calls
    # them), the vector ranking after it.
    timed = {"scope_size": candidates, "text_candidates": candidates, "vector_candidates": ranking}
    with _timing(timed) as parts:
        for n, query in enumerate(queries):
            outcome = ranking.memory_search(user=user, query=query)
            if n >= WARMUPS:
                embed.append(outcome.timings_ms["embed"])
                total.append(outcome.timings_ms["search"])
                both.append(outcome.timings_ms["embed"] + outcome.timings_ms["search"])
                methods[outcome.method] += 1
    vector, text = parts["vector_candidates"][WARMUPS:], parts["text_candidates"][WARMUPS:]
    count = parts["scope_size"][WARMUPS:]
    return {
        "count": (_pct(count, 50), _pct(count, 95)),
        "embed": (_pct(embed, 50), _pct(embed, 95)),
        "search": (_pct(total, 50), _pct(total, 95)),
        # The count and the text ranking run while the query is embedded: part of them is hidden in `embed`.
        "embed_and_search": (_pct(both, 50), _pct(both, 95)),
        "vector": (_pct(vector, 50), _pct(vector, 95)),
        "text": (_pct(text, 50), _pct(text, 95)),
        "methods": dict(methods),
    }


def explain_search(user, query: str) -> list[tuple[str, str]]:
    from django.db import connection, transaction

    from apps.memories.search import memory_search

    explainer = Explainer()
    # In a transaction every statement runs on this connection, the text ranking's too (apps/common/beside.py).
    with transaction.atomic(), connection.execute_wrapper(explainer):
        memory_search(user=user, query=query)
    return [(_label(s["sql"]), describe(s["plan"])) for s in explainer.statements]


def explain_knn(scope, vector, k: int) -> dict[str, str]:
    from django.db import connection

    plans = {}
    for path in PATHS:
        explainer = Explainer()
        with connection.execute_wrapper(explainer):
            _knn(scope, vector, k=k, path=path)
        plans[path] = describe(explainer.statements[-1]["plan"])
    return plans


# --- main --------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--others-ratio", type=float, default=1.0, help="Other users' memories per target memory.")
    parser.add_argument("--rebuild", action="store_true", help="Generate the requested sizes again.")
    parser.add_argument("--drop", type=int, nargs="+", default=[], help="Remove these sizes' worlds from the table.")
    parser.add_argument("--explain", action="store_true", help="Also list the ORM's statements of the search.")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--extra-ef", type=int, nargs="*", default=[1000], help="Also HNSW recall at these ef_search.")
    parser.add_argument(
        "--isolation",
        action="store_true",
        help="The same user (--isolation-size memories) in two databases of its own, among --isolation-others rows "
        "of other users: its search p95 in each and their ratio.",
    )
    parser.add_argument("--isolation-size", type=int, default=10_000)
    parser.add_argument("--isolation-others", type=int, nargs=2, default=[200_000, 2_000_000])
    parser.add_argument("--json-out", type=Path, help="Also write each size's latency and recall figures here.")
    parser.add_argument(
        "--own-index-min", type=int, help="A user's own HNSW index from this many vectors (the setting otherwise)."
    )
    args = parser.parse_args()
    if args.own_index_min is not None:  # before the settings load; the isolation's worlds inherit it
        os.environ["LOREKEEPER_SEARCH_OWN_INDEX_MIN"] = str(args.own_index_min)
    if args.isolation:
        isolation(args)
        return
    _setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from apps.memories.embeddings import embed_texts
    from apps.memories.search.candidates import Scope

    config = _config()
    if config.key != "local:all-MiniLM-L6-v2":
        sys.exit(f"needs the local all-MiniLM-L6-v2 deployment model, found {config.key!r}")
    corpus = Corpus(args.data, args.seed)
    if args.drop:
        drop_worlds(args.drop)
    sizes = sorted(set(args.sizes) - set(args.drop))
    worlds = ensure_worlds(sizes=sizes, seed=args.seed, ratio=args.others_ratio, rebuild=args.rebuild, corpus=corpus)
    from apps.memories.services.own_indexes import own_indexes_refresh

    for size in sizes:  # as the task an embedding run sends would: the target user's own HNSW index, when due
        started = time.perf_counter()
        done = own_indexes_refresh(user_id=get_user_model().objects.get(username=_username(size, 0)).pk)
        if done:
            print(f"size {size:,}: the user's own HNSW index {done} in {time.perf_counter() - started:.0f} s")
    recall_vectors = embed_texts(config, corpus.questions[:RECALL_QUERIES])
    pool = corpus.questions[RECALL_QUERIES:]
    k = max(settings.LOREKEEPER_SEARCH["candidates"], 20)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT user_id), current_setting('shared_buffers') FROM memories_memory"
        )
        table_rows, table_users, shared_buffers = cursor.fetchone()
    search = settings.LOREKEEPER_SEARCH
    print(
        f"model {config.key}; k {k}, ef_search {search['ef_search']}, exact_max {search['exact_max']}, "
        f"hnsw_min_share {search['hnsw_min_share']}; "
        f"seed {args.seed}; table: {table_rows:,} memories of {table_users} users; shared_buffers {shared_buffers}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    rows = []
    for n, size in enumerate(sizes):
        user = get_user_model().objects.get(username=_username(size, 0))
        scope = Scope(user=user, character_id=None, chat_id=None, kinds=None, include_retired=False)
        sentences = pool[n * (QUERIES + WARMUPS) * SENTENCES :][: (QUERIES + WARMUPS) * SENTENCES]
        queries = [" ".join(sentences[i : i + SENTENCES]) for i in range(0, len(sentences), SENTENCES)]
        recall = measure_recall(scope, recall_vectors, k, args.extra_ef)
        text = measure_text_approximation(scope, queries[:TEXT_QUERIES], k)
        latency = measure_latency(user, queries)
        knn_plans = explain_knn(scope, recall_vectors[0], k)
        statements = explain_search(user, queries[-1])
        rows.append((size, worlds[size], latency, recall, text))
        print(
            f"\n== {size:,} memories of one user ({100 * size / table_rows:.1f}% of the table); "
            f"methods {latency['methods']}"
        )
        for path, plan in knn_plans.items():
            print(f"  one knn, {path:8s}{plan}")
        print("  one memory_search, statement by statement (EXPLAIN ANALYZE):")
        for label, plan in statements:
            if args.explain or label not in ("rows", "embed settings", "embed cache", "lexemes", "entities"):
                print(f"    {label:14s}{plan}")
    print_figures(rows)
    print(f"load average {os.getloadavg()[0]:.2f} (2 cores, shared with other work)")
    if args.json_out:
        figures = {size: {"latency": latency, "recall": recall} for size, _, latency, recall, _ in rows}
        args.json_out.write_text(json.dumps(figures, default=float))


def isolation(args) -> None:
    """One user's search among few other users' rows and among many: each world in a database of its own (the
    table holds only it), built and measured by this script in a child process; the last line is the ratio of the
    user's search p95 in the larger world to the smaller."""
    import subprocess
    import tempfile

    size, results = args.isolation_size, {}
    for others in args.isolation_others:
        database = f"lorekeeper_bench_search_iso_{size}_{others}"
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            command = [sys.executable, __file__, "--sizes", str(size), "--others-ratio", str(others / size)]
            command += ["--seed", str(args.seed), "--data", str(args.data), "--json-out", out.name, "--extra-ef"]
            command += ["--rebuild"] if args.rebuild else []
            print(f"\n### the user's {size:,} memories among {others:,} of others (database {database})", flush=True)
            subprocess.run(command, check=True, env={**os.environ, "LOREKEEPER_DATABASE_NAME": database})
            results[others] = json.loads(Path(out.name).read_text())[str(size)]
    print(
        "\n  others rows | search ms p50/p95 | vector ms p50/p95 | text ms p50/p95 | embed ms p50 "
        "| embed + search p50/p95 | HNSW recall@10"
    )
    for others, figures in results.items():
        latency, recall = figures["latency"], figures["recall"]
        both = latency.get("embed_and_search", (float("nan"), float("nan")))
        print(
            f"{others:>13,} | {latency['search'][0]:7.1f} / {latency['search'][1]:<7.1f} "
            f"| {latency['vector'][0]:7.1f} / {latency['vector'][1]:<7.1f} "
            f"| {latency['text'][0]:6.1f} / {latency['text'][1]:<6.1f} | {latency['embed'][0]:12.1f} "
            f"| {both[0]:10.1f} / {both[1]:<10.1f} | {recall['hnsw_r10']:.3f}"
        )
    few, many = (results[others]["latency"]["search"][1] for others in args.isolation_others)
    names = [f"{others / 1e6:g}M" for others in args.isolation_others]
    print(f"isolation: p95 {few:.1f} ms among {names[0]}, {many:.1f} ms among {names[1]}, ratio {many / few:.2f}")


def print_figures(rows: list) -> None:
    def pair(values: tuple[float, float], width: int = 6) -> str:
        return f"{values[0]:{width}.1f} / {values[1]:<{width}.1f}"

    print(
        "\n     size | embed ms p50/p95 | search ms p50/p95 | (vector | text) ms p50/p95      "
        "| count ms p50 | recall@10 plan/hnsw | @k hnsw | knn ms p50 plan/hnsw/exact"
    )
    for size, _, latency, recall, _ in rows:
        print(
            f"{size:>9,} | {pair(latency['embed'])} | {pair(latency['search'], 7)} "
            f"| {pair(latency['vector'])} | {pair(latency['text'])} | {latency['count'][0]:12.1f} "
            f"| {recall['planner_r10']:.3f} / {recall['hnsw_r10']:.3f}       | {recall['hnsw_rk']:.3f}  "
            f"| {recall['planner_ms'][0]:.1f} / {recall['hnsw_ms'][0]:.1f} / {recall['exact_ms'][0]:.1f}"
        )
    print("\n     size | HNSW recall@10 (@k) at other ef_search    | text top 10 kept vs exact | text ms p50 / exact")
    for size, _, _, recall, text in rows:
        others = ", ".join(
            f"ef {ef}: {recall[f'ef{ef}_r10']:.3f} ({recall[f'ef{ef}_rk']:.3f})" for ef in recall["extra_ef"]
        )
        print(
            f"{size:>9,} | {others:40s} | {text['overlap10']:25.3f} "
            f"| {text['default_ms']:.1f} / {text['exact_ms']:.0f}"
        )
    print("\n     size | world rows | copy s | gin s | hnsw s | vacuum s | total min | table rows then | built")
    for size, world, _, _, _ in rows:
        minutes = sum(world[key] for key in ("load_s", "gin_s", "hnsw_s", "vacuum_s")) / 60
        print(
            f"{size:>9,} | {world['total_rows']:>10,} | {world['load_s']:6.0f} | {world['gin_s']:5.0f} "
            f"| {world['hnsw_s']:6.0f} | {world['vacuum_s']:8.0f} | {minutes:9.1f} | {world['table_rows']:>15,} "
            f"| {world['built_at']:%Y-%m-%d %H:%M}"
        )
    print("targets: recall@10 >= 0.95 at each size; search p95 < 50 ms at 100,000; 1,000,000 built in 30 min")


if __name__ == "__main__":
    main()
