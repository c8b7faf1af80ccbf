"""memory_search: hybrid retrieval over a user's memories (and chat messages), scored with entity-core's signals.

1. The query is split into sentences (at most 5); each is embedded (cache first) and searched by KNN in pgvector,
   within the user's scope and the user's current embedding model only.
2. Beside it PostgreSQL full-text ranks the memories sharing the query's words (any of them, stemmed), because
   embedding similarity alone is weak on names, dates and rare words.
3. The rankings are fused by reciprocal rank fusion (the best rank of a memory over the sentences counts once
   for the vector side); a chat turn also gains a share of its best neighbouring turn's score (an answer follows
   its question). Scaled so that the best possible memory scores 1, this is the `relevance` signal, taking the
   place of entity-core's vector score.
4. score = w_relevance·relevance + w_recency·1/(1 + age_days·0.007) + w_graph·graph + w_instance·instance, with
   graph = 1 for memories linked to an entity named in the query and instance = 1 for memories from the asking
   instance (weights in settings.LOREKEEPER_SEARCH). Results under `min_score` are dropped.

With no vector possible (embeddings off, provider down) the text ranking alone answers, and `method` says so.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction
from django.utils import timezone

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import config_for, embed_query
from apps.memories.models import INDEXED_DIMENSIONS, SEARCH_CONFIG, Entity, Kind, Memory, Status

MAX_LIMIT = 100
MAX_QUERY_LEXEMES = 32
# Scopes are counted up to this many rows; past it the planner estimates their size.
SCOPE_CAP = 50000
EXCERPT_CHARS = 2000
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class SearchHit:
    memory: Memory
    score: float
    relevance: float
    excerpt: str
    signals: dict[str, float | None] = field(default_factory=dict)


@dataclass
class SearchOutcome:
    method: str  # hybrid | vector | text
    results: list[SearchHit]
    timings_ms: dict[str, float] = field(default_factory=dict)


def split_sentences(query: str, *, limit: int) -> list[str]:
    sentences = [s.strip() for s in _SENTENCE_END.split(query) if s and s.strip()]
    if len(sentences) > limit:
        # Keep the longest: a question's topic is rarely in the "Hi!" before it.
        keep = sorted(sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))[:limit])
        sentences = [sentences[i] for i in keep]
    return sentences


class _Scope:
    """The WHERE clause every candidate query shares: the user's own memories, within character/chat/kinds."""

    def __init__(self, *, user: AbstractUser, character_id, chat_id, kinds, include_retired: bool) -> None:
        self.sql = ["m.user_id = %s"]
        self.params: list = [user.pk]
        self.character_ids: list[int] = []
        if chat_id is not None:
            chat = chat_selectors.chat_get(user=user, chat_id=chat_id)
            self.character_ids = [c.pk for c in chat.characters.all()]
            # The chat's own memories and messages, plus its characters' persistent memories; never another chat's.
            self.sql.append("(m.chat_id = %s OR (m.chat_id IS NULL AND m.character_id = ANY(%s)))")
            self.params += [chat.pk, self.character_ids]
        if character_id is not None:
            character = chat_selectors.character_get(user=user, character_id=character_id)
            self.character_ids = [character.pk]
            self.sql.append(
                "(m.character_id = %s OR m.chat_id IN "
                "(SELECT cc.chat_id FROM chats_chat_characters cc WHERE cc.character_id = %s))"
            )
            self.params += [character.pk, character.pk]
        if kinds:
            self.sql.append("m.kind = ANY(%s)")
            self.params.append(list(kinds))
        if not include_retired:
            self.sql.append("m.status = %s")
            self.params.append(Status.ACTIVE)

    @property
    def where(self) -> str:
        return " AND ".join(self.sql)


def _scope_size(scope: _Scope) -> int:
    """Rows in scope: counted up to SCOPE_CAP (or exact_max), an index-only scan on the common scopes; past that
    the planner's estimate, since the text ranking scales word frequencies by it (a scope of a million rows counted
    as 50,001 would weigh the words it counts exactly twenty times too common)."""
    cap = max(SCOPE_CAP, int(settings.LOREKEEPER_SEARCH["exact_max"])) + 1
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories_memory m WHERE {scope.where} LIMIT {cap}) s",
            scope.params,
        )
        counted = cursor.fetchone()[0]
        if counted < cap:
            return counted
        cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM memories_memory m WHERE {scope.where}", scope.params)
        plan = cursor.fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        return max(counted, int(plan[0]["Plan"]["Plan Rows"]))


def _vector_candidates(
    scope: _Scope, *, vectors: list[list[float]], model_key: str, k: int, size: int
) -> dict[int, float]:
    """Best cosine similarity per memory over the query sentences. A small scope (at most `exact_max` rows), or
    one that is less than `hnsw_min_share` of the table, is scanned exactly, all sentences in one pass; a large one
    goes through the HNSW index of the dimension, one filtered KNN per sentence. (HNSW over a scope that is a small
    part of the table must walk far to find enough of its rows: slower than the exact scan there, and less
    accurate. bench/memory_search.py measured 100,000 memories in a 2.2 million-row table: 600 ms by HNSW, 145 ms
    exact.)"""
    dim = len(vectors[0])
    literals = ["[" + ",".join(repr(float(x)) for x in vector) + "]" for vector in vectors]
    where = f"{scope.where} AND m.embedding_dim = {int(dim)} AND m.embedding_model = %s"
    params = [*scope.params, model_key]
    config = settings.LOREKEEPER_SEARCH
    with connection.cursor() as cursor:
        exact = size <= int(config["exact_max"])
        if not exact and config["hnsw_min_share"] > 0:
            cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'memories_memory'::regclass")
            table_rows = cursor.fetchone()[0]
            exact = table_rows > 0 and size < config["hnsw_min_share"] * table_rows
        if exact:
            nearest = "LEAST(" + ", ".join(["m.embedding <=> %s::vector"] * len(literals)) + ")"
            cursor.execute(
                f"SELECT m.id, {nearest} AS d FROM memories_memory m WHERE {where} ORDER BY d LIMIT {int(k)}",
                [*literals, *params],
            )
            return {pk: 1.0 - float(distance) for pk, distance in cursor.fetchall()}
        if dim in INDEXED_DIMENSIONS:
            column, cast = f"(m.embedding::vector({dim}))", f"%s::vector({dim})"
        else:
            column, cast = "m.embedding", "%s::vector"
        parts, union_params = [], []
        for literal in literals:
            parts.append(
                f"(SELECT m.id, {column} <=> {cast} AS d FROM memories_memory m WHERE {where} "
                f"ORDER BY {column} <=> {cast} LIMIT {int(k)})"
            )
            union_params += [literal, *params, literal]
        # Filtered HNSW scans stop early without iterative scanning; relaxed order is re-sorted below.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(config['ef_search'])}")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(" UNION ALL ".join(parts), union_params)
        best: dict[int, float] = {}
        for pk, distance in cursor.fetchall():
            similarity = 1.0 - float(distance)
            if similarity > best.get(pk, -2.0):
                best[pk] = similarity
        return best


def _tsquery_term(lexeme: str) -> str:
    """A lexeme as a quoted tsquery operand (lexemes of URLs and paths can hold quotes and backslashes)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _idf(total: float, df: float) -> float:
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


def _text_candidates(scope: _Scope, *, query: str, k: int, size: int) -> dict[int, float]:
    """Memories sharing words with the query, ranked by the summed IDF of the words they share (BM25 without its
    length normalisation, which on chat turns cost recall). PostgreSQL's ts_rank has no IDF, so a speaker's name
    in half the turns would outweigh the one rare word that matters; document frequencies are taken within the
    scope (`size` rows).

    A scope of fewer than `text_sample` rows is counted exactly and every row sharing a word is ranked. On a larger
    one the words are counted over the first `text_sample` rows the scan finds, and only rows holding one of the
    rarest words, those estimated to fill `text_budget` rows between them, are ranked: a row sharing only common
    words with the query could not rank high anyway, and reading them all is what made text search slow on large
    scopes. The rare words' frequencies are then counted exactly over those rows (every row holding one is among
    them)."""
    sample, budget = int(settings.LOREKEEPER_SEARCH["text_sample"]), int(settings.LOREKEEPER_SEARCH["text_budget"])
    with connection.cursor() as cursor:
        # The query's first MAX_QUERY_LEXEMES distinct words, in the order they come.
        cursor.execute(
            f"SELECT lexeme FROM unnest(to_tsvector('{SEARCH_CONFIG}', %s)) "
            f"ORDER BY positions[1], lexeme LIMIT {MAX_QUERY_LEXEMES}",
            [query],
        )
        terms = [_tsquery_term(row[0]) for row in cursor.fetchall()]
        if not terms:
            return {}
        filters = ", ".join("count(*) FILTER (WHERE s.v @@ %s::tsquery)" for _ in terms)
        cursor.execute(
            f"SELECT count(*), {filters} FROM (SELECT m.search_vector v FROM memories_memory m "
            f"WHERE {scope.where} LIMIT {sample}) s",
            [*terms, *scope.params],
        )
        seen, *counts = cursor.fetchone()
        if seen < sample:  # the whole scope was read: exact frequencies
            weights = {term: f"{_idf(seen, df)!r}::float8" for term, df in zip(terms, counts, strict=True) if df}
            if not weights:
                return {}
            return _rank_text(cursor, scope, weights=weights, match=list(weights), k=k, limit=None)
        total = max(size, seen)
        estimates = {term: max(count, 0.5) * total / seen for term, count in zip(terms, counts, strict=True)}
        match: list[str] = []
        spent = 0.0
        for term in sorted(terms, key=lambda term: estimates[term]):
            if match and spent + estimates[term] > budget:
                break
            match.append(term)
            spent += estimates[term]
        weights = {}
        for term in terms:
            if term in match:  # counted over the candidates, below
                i = match.index(term) + 1
                weights[term] = f"(SELECT ln(1 + ({total} - d.d[{i}] + 0.5) / (d.d[{i}] + 0.5)) FROM d)"
            else:
                weights[term] = f"{_idf(total, estimates[term])!r}::float8"
        return _rank_text(cursor, scope, weights=weights, match=match, k=k, limit=2 * budget)


def _rank_text(
    cursor, scope: _Scope, *, weights: dict[str, str], match: list[str], k: int, limit: int | None
) -> dict[int, float]:
    """Rows of the scope holding one of `match`, scored by the summed weight (an SQL expression) of the words they
    hold. With a `limit` (a sampled scope) at most that many rows are read, and the frequencies of `match` are
    counted over them first, into CTE `d` that the weights may read as d.d[i] (i: the word's place in `match`, from
    1). Each row's words are tested once, into a bit mask that the counts and the sums read. ts_rank_cd, which
    rewards the words standing close together, breaks ties among the best rows only."""
    bit = {term: 1 << i for i, term in enumerate(weights)}
    mask = " + ".join(f"(CASE WHEN m.search_vector @@ %s::tsquery THEN {bit[term]} ELSE 0 END)" for term in weights)
    sums = " + ".join(
        f"(CASE WHEN c.b & {bit[term]} <> 0 THEN {weight} ELSE 0.0::float8 END)" for term, weight in weights.items()
    )
    cap, frequencies = "", ""
    if limit is not None:
        cap = f"LIMIT {int(limit)}"
        counts = ", ".join(f"count(*) FILTER (WHERE cand.b & {bit[term]} <> 0)" for term in match)
        frequencies = f", d AS MATERIALIZED (SELECT ARRAY[{counts}]::float8[] AS d FROM cand)"
    cursor.execute(
        f"WITH cand AS MATERIALIZED (SELECT m.id, m.search_vector v, ({mask})::bigint AS b FROM memories_memory m "
        f"WHERE {scope.where} AND m.search_vector @@ %s::tsquery {cap}){frequencies} "
        f"SELECT t.id, t.s + 0.001 * ts_rank_cd(t.v, %s::tsquery, 32) AS score FROM ("
        f"SELECT c.id, c.v, {sums} AS s FROM cand c ORDER BY s DESC, c.id LIMIT {2 * int(k)}) t "
        f"ORDER BY score DESC, t.id LIMIT {int(k)}",
        [*weights, *scope.params, " | ".join(match), " | ".join(weights)],
    )
    return {pk: float(score) for pk, score in cursor.fetchall()}


def _ranks(scores: dict[int, float]) -> dict[int, int]:
    return {pk: rank for rank, pk in enumerate(sorted(scores, key=lambda pk: (-scores[pk], pk)), start=1)}


# What scoring reads of each candidate, in one query with what the neighbour spread reads.
_ROW_FIELDS = (
    "id",
    "kind",
    "chat_id",
    "message_index",
    "occurred_at",
    "updated_at",
    "source_instance",
    "participating_instances",
)


def _spread_to_neighbours(
    fused: dict[int, float], rows: dict[int, tuple], share: float, *, user: AbstractUser
) -> dict[int, float]:
    """A chat turn gains `share` of its best neighbour's fused score: the answer to a question is often the turn
    after the one that shares the question's words. Neighbours not yet candidates join (same chat, so same scope);
    their rows are added to `rows`."""
    at = {(row.chat_id, row.message_index): pk for pk, row in rows.items() if row.kind == Kind.MESSAGE}
    if not at:
        return fused
    wanted = {(chat_id, index + step) for chat_id, index in at for step in (-1, 1)} - at.keys()
    if wanted:
        extra = Memory.objects.filter(
            user=user,
            kind=Kind.MESSAGE,
            chat_id__in={chat_id for chat_id, _ in wanted},
            message_index__in={index for _, index in wanted},
        ).values_list(*_ROW_FIELDS, named=True)
        for row in extra:
            if (row.chat_id, row.message_index) in wanted:
                at[(row.chat_id, row.message_index)] = row.id
                rows[row.id] = row
    spread = dict(fused)
    for (chat_id, index), pk in at.items():
        best = max(fused.get(at.get((chat_id, index + step), -1), 0.0) for step in (-1, 1))
        if best:
            spread[pk] = fused.get(pk, 0.0) + share * best
    return spread


def _entities_named(*, user: AbstractUser, query: str, character_ids: list[int]) -> list[int]:
    lowered = query.lower()
    words = set(_WORD.findall(lowered))
    # A one-word name matches a word of the query; any other ("Jean-Luc", "O'Brien", "the Old Mill") the same text
    # not inside a longer word.
    candidates = Entity.objects.filter(user=user)
    if character_ids:
        candidates = candidates.filter(character_id__in=character_ids) | Entity.objects.filter(
            user=user, character__isnull=True
        )
    found = []
    for pk, name, aliases in candidates.values_list("id", "name", "aliases"):
        for label in (name, *aliases):
            label = label.lower().strip()
            if not label:
                continue
            single_word = _WORD.fullmatch(label) is not None
            if (label in words) if single_word else re.search(rf"(?<!\w){re.escape(label)}(?!\w)", lowered):
                found.append(pk)
                break
    return found


def _graph_linked(*, entity_ids: list[int], memory_ids: list[int]) -> set[int]:
    if not entity_ids or not memory_ids:
        return set()
    through = Memory.entities.through
    return set(
        through.objects.filter(entity_id__in=entity_ids, memory_id__in=memory_ids).values_list("memory_id", flat=True)
    )


def excerpt(content: str, query: str, *, size: int = EXCERPT_CHARS) -> str:
    """The whole memory when short; else the passage richest in the query's words, with context around it."""
    if len(content) < size:
        return content
    words = {w.lower() for w in _WORD.findall(query) if len(w) > 2}
    pieces = [m for m in re.finditer(r"[^\n.!?]+[.!?]?", content)]
    if not pieces or not words:
        return content[:size].rstrip() + "…"
    best = max(pieces, key=lambda m: sum(w.lower() in words for w in _WORD.findall(m.group())))
    middle = (best.start() + best.end()) // 2
    start = max(0, min(middle - size // 2, len(content) - size))
    text = content[start : start + size].strip()
    return ("…" if start > 0 else "") + text + ("…" if start + size < len(content) else "")


def _recency(moment: datetime, now: datetime, per_day: float) -> float:
    age_days = max((now - moment).total_seconds() / 86400.0, 0.0)
    return 1.0 / (1.0 + age_days * per_day)


@transaction.atomic
def memory_search(
    *,
    user: AbstractUser,
    query: str,
    character_id: int | None = None,
    chat_id: int | None = None,
    kinds: list[str] | None = None,
    limit: int = 10,
    min_score: float | None = None,
    include_retired: bool = False,
    instance: str = "",
) -> SearchOutcome:
    config = settings.LOREKEEPER_SEARCH
    query = query.replace("\x00", "").strip()
    if not query:
        raise ApplicationError("Give a query to search for.", {"field": "query"})
    unknown = [k for k in kinds or [] if k not in Kind.values]
    if unknown:
        raise ApplicationError("Unknown memory kind(s).", {"field": "kinds", "kinds": unknown})
    limit = max(1, min(int(limit), MAX_LIMIT))
    min_score = config["min_score"] if min_score is None else min_score
    scope = _Scope(user=user, character_id=character_id, chat_id=chat_id, kinds=kinds, include_retired=include_retired)
    k = max(config["candidates"], limit * 2)
    timings: dict[str, float] = {}

    started = time.perf_counter()
    embedding = config_for(user)
    sentences = split_sentences(query, limit=config["max_sentences"]) or [query]
    vectors = embed_query(embedding, sentences)
    timings["embed"] = (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    rankings: list[tuple[float, dict[int, int]]] = []
    size = _scope_size(scope)
    vector_scores = (
        _vector_candidates(scope, vectors=vectors, model_key=embedding.key, k=k, size=size) if vectors else {}
    )
    text_scores = _text_candidates(scope, query=query, k=k, size=size)
    if vectors:
        rankings.append((config["fusion"]["vector"], _ranks(vector_scores)))
    if text_scores:
        rankings.append((config["fusion"]["text"], _ranks(text_scores)))
    method = "hybrid" if vectors and text_scores else ("vector" if vectors else "text")

    rrf_k = config["rrf_k"]
    fused: dict[int, float] = {}
    for weight, ranking in rankings:
        for pk, rank in ranking.items():
            fused[pk] = fused.get(pk, 0.0) + weight / (rrf_k + rank)
    best_possible = sum(weight for weight, _ in rankings) / (rrf_k + 1) if rankings else 1.0
    candidates = Memory.objects.filter(user=user, pk__in=list(fused))
    rows = {row.id: row for row in candidates.values_list(*_ROW_FIELDS, named=True)}
    spread = config.get("neighbours", 0.0)
    if spread:
        fused = _spread_to_neighbours(fused, rows, spread, user=user)
        best_possible *= 1 + spread

    entity_ids = _entities_named(user=user, query=query, character_ids=scope.character_ids)
    linked = _graph_linked(entity_ids=entity_ids, memory_ids=list(fused))
    weights, now = config["weights"], timezone.now()
    scored: list[tuple[float, float, int, dict]] = []
    for pk, row in rows.items():
        relevance = fused[pk] / best_possible
        signals = {
            "vector": vector_scores.get(pk),
            "text": text_scores.get(pk),
            "recency": _recency(row.occurred_at or row.updated_at, now, config["recency_per_day"]),
            "graph": 1.0 if pk in linked else 0.0,
            "instance": 1.0
            if instance and (row.source_instance == instance or instance in row.participating_instances)
            else 0.0,
        }
        score = (
            weights["relevance"] * relevance
            + weights["recency"] * signals["recency"]
            + weights["graph"] * signals["graph"]
            + weights["instance"] * signals["instance"]
        )
        if score >= min_score:
            scored.append((score, relevance, pk, signals))
    scored.sort(key=lambda item: (-item[0], item[2]))
    top = scored[:limit]
    memories = Memory.objects.filter(user=user).defer("embedding").in_bulk([pk for _, _, pk, _ in top])
    results = [
        SearchHit(
            memory=memories[pk],
            score=round(score, 6),
            relevance=round(relevance, 6),
            excerpt=excerpt(memories[pk].content, query),
            signals={key: (round(value, 6) if value is not None else None) for key, value in signals.items()},
        )
        for score, relevance, pk, signals in top
        if pk in memories  # a message re-indexed away since the candidates were read (each statement its snapshot)
    ]
    timings["search"] = (time.perf_counter() - started) * 1000
    return SearchOutcome(method=method, results=results, timings_ms=timings)
