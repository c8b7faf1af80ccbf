"""memory_search: hybrid retrieval over a user's memories (and chat messages), scored with entity-core's signals
(docs/GLOSSARY.md).

1. The query is split into sentences (at most 5); each is embedded (cache first) and searched by KNN in pgvector,
   within the user's scope and the user's current embedding model only.
2. Beside it PostgreSQL full-text ranks the memories sharing the query's words (any of them, stemmed), because
   embedding similarity alone is weak on names, dates and rare words.
3. The two are fused by their values, not their ranks: relevance is the weighted mean of the memory's words (the
   share of the query's word weight, IDF in the scope, that it holds) and its meaning (its best similarity over the
   sentences, from `min_similarity` = 0 to identical = 1). A chat turn also gains a share of its best neighbouring
   turn's relevance (an answer follows its question). This is the `relevance` signal, taking the place of
   entity-core's vector score; it depends on the memory and the query only, never on what else the query found,
   so a query nothing matches (no shared word, no close meaning) answers nothing, and relevance means the same from
   one query to the next (docs/SEARCH.md). (`fusion.method = "rank"` fuses by reciprocal rank instead, as search
   did before: bench/locomo_recall.py compares the two.)
4. score = w_relevance·relevance + w_recency·1/(1 + age_days·0.007) + w_graph·graph + w_instance·instance
   + w_speaker·speaker + w_time·time, with graph = 1 for memories linked to an entity named in the query,
   instance = 1 for memories from the asking instance, speaker = 1 for chat turns spoken by someone the query names
   and time = 1 for memories whose story time falls in a date the query names (apps/memories/search/dates.py;
   weights in settings.LOREKEEPER_SEARCH). Results under `min_score` are dropped.

With no vector possible (embeddings off, provider down, or a query the local model reads no word of: a string of no
language) the text ranking alone answers, and `method` says so.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection

from apps.common.beside import beside, beside_committed
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import config_for, embed_query, reads_words
from apps.memories.models import Kind, Memory
from apps.memories.search.candidates import Scope, TextScores, counted_text_candidates, vector_candidates
from apps.memories.search.dates import within
from apps.memories.search.named import Named, entities_named, graph_linked, query_named
from apps.memories.search.text import excerpt, split_sentences

MAX_LIMIT = 100
KINDS = frozenset(Kind.values)  # Kind.values makes its list anew at each read: once per kind asked, every search


@dataclass
class SearchHit:
    memory: Memory
    score: float
    relevance: float
    excerpt: str
    signals: dict[str, float | None] = field(default_factory=dict)

    @property
    def found_by(self) -> list[str]:
        """What found the hit, as a person reads it: its words, its meaning (only when a vector ranked it: none
        with embeddings off), or neither, a turn next to one that matched (the neighbour spread)."""
        found = [name for name, signal in (("words", "text"), ("meaning", "vector")) if self.signals.get(signal)]
        return found or ["next to a match"]


@dataclass
class SearchOutcome:
    method: str  # hybrid | vector | text
    results: list[SearchHit]
    timings_ms: dict[str, float] = field(default_factory=dict)


def _ranks(scores: dict[int, float]) -> dict[int, int]:
    return {pk: rank for rank, pk in enumerate(sorted(scores, key=lambda pk: (-scores[pk], pk)), start=1)}


class Row(NamedTuple):
    """What scoring reads of a candidate. `occurred` (its time in the story, or None) and `moment` (that, else when
    it last changed: what recency counts from) are seconds since the epoch: a search reads hundreds of rows, and
    loading two datetimes each was 3 ms of its Python. `speaker`: a chat turn's speaker (the message's name).
    `linked`: whether it is linked to an entity the query names."""

    id: int
    kind: str
    chat_id: int | None
    message_index: int | None
    source_instance: str
    participating_instances: list[str]
    status: str
    occurred: float | None
    moment: float
    speaker: str
    linked: bool


_ROW_COLUMNS = (
    "m.id, m.kind, m.chat_id, m.message_index, m.source_instance, m.participating_instances, m.status, "
    "EXTRACT(EPOCH FROM m.occurred_at)::float8 AS occurred, "
    "EXTRACT(EPOCH FROM COALESCE(m.occurred_at, m.updated_at))::float8 AS moment"
)
# A chat turn's speaker, when the speaker signal weighs something (else '').
_SPEAKER = (
    "COALESCE((SELECT msg.name FROM chats_message msg WHERE m.kind = 'message' AND msg.chat_id = m.chat_id "
    "AND msg.index = m.message_index), '') AS speaker"
)
# Whether the memory is linked to one of the entities the query names (their ids, `%(entities)s`).
_LINKED = (
    f"EXISTS (SELECT 1 FROM {Memory.entities.through._meta.db_table} me WHERE me.memory_id = m.id "
    "AND me.entity_id = ANY(%(entities)s::bigint[])) AS linked"
)
# The candidates and, for the neighbour spread, the chat turns next to a candidate turn that are not candidates
# themselves (same chat, so same scope): one round trip, not three (the rows, their neighbours, the speakers).
_ROWS_SQL = (
    "WITH c AS MATERIALIZED (SELECT {columns}, {speaker}, {linked} FROM memories_memory m "
    "WHERE m.user_id = %(user)s AND m.id = ANY(%(ids)s::bigint[])) SELECT * FROM c"
)
_NEIGHBOURS_SQL = (
    " UNION ALL SELECT {columns}, {speaker}, {linked} FROM memories_memory m JOIN (SELECT DISTINCT c.chat_id, "
    "c.message_index + step.by AS message_index FROM c CROSS JOIN (VALUES (-1), (1)) step(by) "
    "WHERE c.kind = 'message') n ON m.chat_id = n.chat_id AND m.message_index = n.message_index "
    "WHERE m.user_id = %(user)s AND m.kind = 'message' AND NOT m.id = ANY(%(ids)s::bigint[]){turns}"
)


def _rows(
    user: AbstractUser, ids, *, neighbours: bool, speakers: bool, entities: list[int], turns_from: int | None
) -> tuple[dict[int, Row], set[int]]:
    """Id → the row search ranks with, for the candidates `ids` and (`neighbours`) the chat turns next to them
    (before `turns_from`, when given: the scope's), each with whether it is linked to one of `entities`; and which
    of those are the candidates."""
    speaker = _SPEAKER if speakers else "'' AS speaker"
    linked = _LINKED if entities else "false AS linked"
    turns = "" if turns_from is None else " AND m.message_index < %(turns_from)s"
    sql = _ROWS_SQL + (_NEIGHBOURS_SQL if neighbours else "")
    with connection.cursor() as cursor:
        cursor.execute(
            sql.format(columns=_ROW_COLUMNS, speaker=speaker, linked=linked, turns=turns),
            {"user": user.pk, "ids": list(ids), "entities": entities, "turns_from": turns_from},
        )
        rows = {row[0]: Row(*row) for row in cursor.fetchall()}
    return rows, {pk for pk in ids if pk in rows}


def _spread_to_neighbours(
    fused: dict[int, float], rows: dict[int, Row], candidates: set[int], share: float
) -> dict[int, float]:
    """A chat turn gains `share` of its best neighbour's fused score: the answer to a question is often the turn
    after the one that shares the question's words. Neighbours that were not candidates are among `rows`."""
    at = {(row.chat_id, row.message_index): pk for pk, row in rows.items() if row.kind == Kind.MESSAGE}
    if not any(rows[pk].kind == Kind.MESSAGE for pk in candidates):
        return fused
    spread = dict(fused)
    for (chat_id, index), pk in at.items():
        best = max(fused.get(at.get((chat_id, index + step), -1), 0.0) for step in (-1, 1))
        if best:
            spread[pk] = fused.get(pk, 0.0) + share * best
    return spread


def _kept(
    scored: list[tuple[float, float, int, dict]], rows: dict[int, tuple], *, status: str | None, entity_id: int | None
) -> list[tuple[float, float, int, dict]]:
    """The scored memories of `status` and linked to the entity `entity_id` (either when given): filters of the
    memory browser, applied before the limit so that they narrow what is shown, never the scores."""
    if status is not None:
        scored = [item for item in scored if rows[item[2]].status == status]
    if entity_id is not None:
        linked = graph_linked(entity_ids=[entity_id], memory_ids=[pk for _, _, pk, _ in scored])
        scored = [item for item in scored if item[2] in linked]
    return scored


def memory_search(
    *,
    user: AbstractUser,
    query: str,
    character_id: int | None = None,
    chat_id: int | None = None,
    chat_characters: list[int] | None = None,
    kinds: list[str] | None = None,
    limit: int = 10,
    min_score: float | None = None,
    include_retired: bool = False,
    instance: str = "",
    scope_rows: int | None = None,
    status: str | None = None,
    entity_id: int | None = None,
    committed: bool = False,
    fields: tuple[str, ...] | None = None,
    embedded: Callable[[], object] | None = None,
    turns_from: int | None = None,
) -> SearchOutcome:
    """`scope_rows`: how many memories the scope holds, when the caller already knows (about) it: the count that
    chooses between an exact scan and the HNSW index, and scales the text ranking's word frequencies, is then
    skipped. `status` (with `include_retired` for a retired one) and `entity_id` keep only the results of that
    status and linked to that entity: the memory browser's filters. `committed`: the caller's transaction, if any,
    wrote none of the scope's memories or the user's entities, so the work that needs no vector runs beside its
    work there too (a reply's recall).
    `chat_characters`: the ids of the characters of the chat `chat_id`, when the caller has read them with the chat
    (whose owner it has checked): not read again. `fields`: the only fields of the hits' memories the caller reads
    (a reply's recall reads three); the others, loaded when read, are not read with them. `embedded`: called once
    the query is embedded, for work the caller starts then (beside the KNN rather than beside the embedding, which
    on two cores then runs alone with the text ranking). `turns_from`: the chat's turns from this index on are
    left out, candidates and neighbours (a reply's recall: the prompt holds them)."""
    config = settings.LOREKEEPER_SEARCH
    query = query.replace("\x00", "").strip()
    if not query:
        raise ApplicationError("Give a query to search for.", {"field": "query"})
    unknown = [k for k in kinds or [] if k not in KINDS]
    if unknown:
        raise ApplicationError("Unknown memory kind(s).", {"field": "kinds", "kinds": unknown})
    limit = max(1, min(int(limit), MAX_LIMIT))
    min_score = config["min_score"] if min_score is None else min_score
    scope = Scope(
        user=user, character_id=character_id, chat_id=chat_id, kinds=kinds, include_retired=include_retired,
        chat_characters=chat_characters, turns_from=turns_from,
    )  # fmt: skip
    k = max(config["candidates"], limit * 2)
    timings: dict[str, float] = {}

    # Work that needs no vector runs on connections of its own while the query is embedded (outside a
    # transaction, or inside one that wrote none of the scope's memories and entities; apps/common/beside.py): the
    # scope's count, which the KNN waits for, then the text ranking; and the entities the query names.
    alongside = beside_committed if committed else beside
    counted: Future[int] = Future()
    text_ranked = alongside(counted_text_candidates, scope, query=query, k=k, size=scope_rows, counted=counted)
    named_entities = alongside(entities_named, user=user, query=query, character_ids=scope.character_ids)

    started = time.perf_counter()
    embedding = config_for(user)
    sentences = split_sentences(query, limit=config["max_sentences"]) or [query]
    readable = not config["meaning_needs_a_known_word"] or reads_words(embedding, query)
    vectors = embed_query(embedding, sentences) if readable else None
    timings["embed"] = (time.perf_counter() - started) * 1000
    if embedded is not None:
        embedded()

    started = time.perf_counter()
    size = counted.result()
    vector_scores = (
        vector_candidates(scope, vectors=vectors, model_key=embedding.key, k=k, size=size) if vectors else {}
    )
    floor = config["min_similarity_by_model"].get(embedding.key, config["min_similarity"])
    vector_scores = {pk: similarity for pk, similarity in vector_scores.items() if similarity >= floor}
    text_scores = text_ranked.result()
    method = "hybrid" if vectors and text_scores else ("vector" if vectors else "text")
    fused, best_possible = _fused(config, vector_scores if vectors else None, text_scores, floor=floor)
    spread = config.get("neighbours", 0.0)
    rows, candidates = _rows(
        user, fused, neighbours=bool(spread), speakers=bool(config["weights"]["speaker"]),
        entities=named_entities.result(), turns_from=scope.turns_from,
    )  # fmt: skip
    if spread:
        fused = _spread_to_neighbours(fused, rows, candidates, spread)  # may pass the best possible: shown as 1

    named = query_named(query=query, rows=rows, config=config)
    scored = _scored(
        config, rows, fused, best_possible, vector_scores, text_scores, named=named, instance=instance,
        min_score=min_score,
    )  # fmt: skip
    scored = _kept(scored, rows, status=status, entity_id=entity_id)
    # In the order of the score as shown (rounded): equal memories keep their age order, older first, rather than
    # the microseconds between their recency.
    scored.sort(key=lambda item: (-round(item[0], 6), item[2]))
    results = _hits(user, scored[:limit], query, fields)
    timings["search"] = (time.perf_counter() - started) * 1000
    return SearchOutcome(method=method, results=results, timings_ms=timings)


def _fused(
    config: dict,
    vector_scores: dict[int, float] | None,
    text_scores: TextScores,
    *,
    floor: float,
):
    """Each candidate's relevance before the neighbour spread, and the divisor that scales it: the weighted sum of
    its words (its text score over the query's whole word weight, `text_scores.total`) and its meaning (similarity
    from the floor, 0, to identical, 1), over the sum of the weights of the rankings that ran (text alone when no
    vector can be made). A memory holding every word of the query and identical in meaning has relevance 1."""
    weights = config["fusion"]
    if weights.get("method", "score") == "rank":
        return _rank_fused(config, vector_scores, text_scores)
    total = text_scores.total
    words = {pk: min(value / total, 1.0) for pk, value in text_scores.items()} if total > 0 else {}
    parts = [(weights["text"], words)]
    if vector_scores is not None:
        span = max(1.0 - floor, 1e-9)
        parts.append((weights["vector"], {pk: (value - floor) / span for pk, value in vector_scores.items()}))
    fused: dict[int, float] = {}
    for weight, values in parts:
        for pk, value in values.items():
            fused[pk] = fused.get(pk, 0.0) + weight * value
    return fused, sum(weight for weight, _ in parts) or 1.0  # every weight set to 0: nothing to divide by


def _rank_fused(config: dict, vector_scores: dict[int, float] | None, text_scores: dict[int, float]):
    """Reciprocal rank fusion of the vector and the text rankings (each weighted), and the best score possible: a
    memory first in both rankings (first in the text ranking alone when no vector can be made), which makes
    relevance 1. How search fused before fusing by value; bench/locomo_recall.py measures the two."""
    weights = config["fusion"]
    rankings = [(weights["text"], _ranks(text_scores))]
    if vector_scores is not None:
        rankings.append((weights["vector"], _ranks(vector_scores)))
    rrf_k = config["rrf_k"]
    fused: dict[int, float] = {}
    for weight, ranking in rankings:
        for pk, rank in ranking.items():
            fused[pk] = fused.get(pk, 0.0) + weight / (rrf_k + rank)
    best_possible = sum(weight for weight, _ in rankings) / (rrf_k + 1)
    return fused, best_possible or 1.0  # every weight set to 0: nothing fused, and nothing to divide by


def _scored(config, rows, fused, best_possible, vector_scores, text_scores, *, named: Named, instance, min_score):
    """(score, relevance, id, signals) of each candidate that scores at least `min_score`."""
    now, per_day = time.time(), config["recency_per_day"]  # moments in seconds since the epoch
    slack = config["time_slack_days"]
    scored: list[tuple[float, float, int, dict]] = []
    for pk, row in rows.items():
        if pk not in fused:  # a neighbour of a turn that matched with nothing to share (relevance 0)
            continue
        from_instance = instance and (row.source_instance == instance or instance in row.participating_instances)
        in_time = (
            bool(named.periods)
            and row.occurred is not None
            and within(datetime.fromtimestamp(row.occurred, UTC), named.periods, slack_days=slack)
        )
        signals = {
            "vector": vector_scores.get(pk),
            "text": text_scores.get(pk),
            "recency": 1.0 / (1.0 + max((now - row.moment) / 86400.0, 0.0) * per_day),  # 1 now, less with age
            "graph": 1.0 if pk in named.linked else 0.0,
            "instance": 1.0 if from_instance else 0.0,
            "speaker": 1.0 if pk in named.spoken else 0.0,
            "time": 1.0 if in_time else 0.0,
        }
        relevance = fused[pk] / best_possible
        score = _score(config["weights"], relevance, signals)
        if score >= min_score:
            scored.append((score, relevance, pk, signals))
    return scored


def _score(weights: dict[str, float], relevance: float, signals: dict[str, float | None]) -> float:
    """The weighted sum of relevance and the other signals (weights in settings.LOREKEEPER_SEARCH)."""
    return (
        weights["relevance"] * relevance
        + weights["recency"] * signals["recency"]
        + weights["graph"] * signals["graph"]
        + weights["instance"] * signals["instance"]
        + weights["speaker"] * signals["speaker"]
        + weights["time"] * signals["time"]
    )


def _hits(
    user: AbstractUser, top: list[tuple[float, float, int, dict]], query: str, fields: tuple[str, ...] | None
) -> list[SearchHit]:
    memories = _memories(user, [pk for _, _, pk, _ in top], fields)
    return [
        SearchHit(
            memory=memories[pk],
            score=round(score, 6),
            relevance=round(min(relevance, 1.0), 6),  # a turn whose neighbour matched too may score past 1
            excerpt=excerpt(memories[pk].content, query),
            signals={key: (round(value, 6) if value is not None else None) for key, value in signals.items()},
        )
        for score, relevance, pk, signals in top
        if pk in memories  # a message re-indexed away since the candidates were read (each statement its snapshot)
    ]


def _memories(user: AbstractUser, ids: list[int], fields: tuple[str, ...] | None) -> dict[int, Memory]:
    """The user's memories `ids`, by id: only their `fields` and content when given, else all but the embedding.
    Fields the model does not convert on reading (as it does a JSON field's) are read by a written statement: the
    ORM took twice as long to compose the query and make the objects, on every search."""
    plain = _plain_fields(tuple(fields)) if fields else None
    if plain is None:
        memories = Memory.objects.filter(user=user)
        return (memories.only("content", *fields) if fields else memories.defer("embedding")).in_bulk(ids)
    with connection.cursor() as cursor:
        columns = ", ".join(field.column for field in plain)
        cursor.execute(
            f"SELECT {columns} FROM memories_memory WHERE user_id = %s AND id = ANY(%s::bigint[])", [user.pk, ids]
        )
        names = [field.attname for field in plain]
        return {row[0]: Memory.from_db(connection.alias, names, row) for row in cursor.fetchall()}


@functools.cache
def _plain_fields(fields: tuple[str, ...]) -> tuple | None:
    """The id, content and `fields` in the model's order (Model.from_db's), or None when one of them is converted on
    reading (by the field or by the database backend)."""
    wanted = {Memory._meta.get_field(name) for name in ("id", "content", *fields)}
    if any(f.get_db_converters(connection) or connection.ops.get_db_converters(f.cached_col) for f in wanted):
        return None
    return tuple(field for field in Memory._meta.concrete_fields if field in wanted)
