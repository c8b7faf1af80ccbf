"""The two candidate rankings of memory_search, within one scope of a user's memories: KNN over the query's sentence
vectors, and full text by summed IDF."""

from __future__ import annotations

import json
import math
from concurrent.futures import Future

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction

from apps.chats import selectors as chat_selectors
from apps.memories.embeddings import vector_literal
from apps.memories.models import INDEXED_DIMENSIONS, SEARCH_CONFIG, Kind, Status

MAX_QUERY_LEXEMES = 32
# Scopes are counted up to this many rows; past it the planner estimates their size.
SCOPE_CAP = 50000
# A memory's words and its owner as one more word ('user 42': the parser never makes a word with a space), the
# expression migration 0009 indexes. A text query ANDed with the owner's word reads only that user's rows from the
# index, however many other users' rows hold the same words.
OWN_WORDS = "(m.search_vector || array_to_tsvector(ARRAY['user ' || m.user_id::text]))"


def owner_word(user_id: int) -> str:
    """The tsquery operand matching OWN_WORDS's word for this user."""
    return f"'user {int(user_id)}'"


def own_index_name(user_id: int, dim: int) -> str:
    """The HNSW index of one user's vectors of one dimension (apps/memories/services/own_indexes.py)."""
    return f"memory_own_{int(user_id)}_{int(dim)}_hnsw"


def own_index_state(name: str) -> str | None:
    """ "valid", "invalid" (being built, or a build that failed) or None (no such index)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [name])
        row = cursor.fetchone()
    return None if row is None else ("valid" if row[0] else "invalid")


class Scope:
    """The WHERE clause every candidate query shares: the user's own memories, within character/chat/kinds; in a
    chat, without its turns from `turns_from` on, when given."""

    def __init__(
        self,
        *,
        user: AbstractUser,
        character_id,
        chat_id,
        kinds,
        include_retired: bool,
        chat_characters=None,
        turns_from: int | None = None,
    ) -> None:
        self.sql = ["m.user_id = %s"]
        self.params: list = [user.pk]
        self.user_id = user.pk
        self.character_ids: list[int] = []
        self.turns_from: int | None = None  # in a chat: its first turn left out
        if chat_id is not None:
            self.character_ids = (
                list(chat_characters)
                if chat_characters is not None
                else chat_selectors.chat_character_ids(user=user, chat_id=chat_id)
            )
            # The chat's own memories and messages, plus its characters' persistent memories; never another chat's.
            self.sql.append("(m.chat_id = %s OR (m.chat_id IS NULL AND m.character_id = ANY(%s)))")
            self.params += [int(chat_id), self.character_ids]
            # The chat's turns from `turns_from` on are left out (the prompt holds them). All of them, by kind: the
            # indexes then skip them, where a test of each turn's index reads every one.
            self.turns_from = None if turns_from is None else int(turns_from)
            if self.turns_from is not None and self.turns_from <= 0:
                kinds = [kind for kind in kinds or Kind.values if kind != Kind.MESSAGE]
                if not kinds:  # turns alone were asked for
                    self.sql.append("false")
            elif self.turns_from is not None:
                self.sql.append("(m.kind <> 'message' OR m.message_index < %s)")
                self.params.append(self.turns_from)
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


def scope_size(scope: Scope) -> int:
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


def vector_candidates(
    scope: Scope, *, vectors: list[list[float]], model_key: str, k: int, size: int, exact_max: int | None = None
) -> dict[int, float]:
    """Best cosine similarity per memory over the query sentences. A small scope (at most `exact_max` rows), or
    one that is less than `hnsw_min_share` of the table, is scanned exactly, all sentences in one pass; a large one
    goes through the HNSW index of the dimension, one filtered KNN per sentence. (HNSW over a scope that is a small
    part of the table must walk far to find enough of its rows: slower than the exact scan there, and less
    accurate. bench/memory_search.py measured 100,000 memories in a 2.2 million-row table: 600 ms by HNSW, 145 ms
    exact.) A user with an HNSW index of their own (apps/memories/services/own_indexes.py) goes through it past
    `exact_max` whatever their share: their rows are all of that index, and the planner picks it for their scope.
    `exact_max` overrides the setting (the lifecycle, which asks once per candidate, trades exactness for speed
    sooner)."""
    dim = len(vectors[0])
    literals = [vector_literal(vector) for vector in vectors]
    where = f"{scope.where} AND m.embedding_dim = {int(dim)} AND m.embedding_model = %s"
    params = [*scope.params, model_key]
    config = settings.LOREKEEPER_SEARCH
    with connection.cursor() as cursor:
        exact, own = size <= int(config["exact_max"] if exact_max is None else exact_max), False
        if not exact and dim in INDEXED_DIMENSIONS:
            own = own_index_state(own_index_name(scope.user_id, dim)) == "valid"
        if not exact and not own and config["hnsw_min_share"] > 0:
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
        # Filtered HNSW scans stop early without iterative scanning; relaxed order is re-sorted below. (SET LOCAL
        # lasts until the transaction ends: this one's.)
        with transaction.atomic():
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


class TextScores(dict):
    """Memory id → text score, and `total`: the query's whole word weight, what a memory holding every word of the
    query scores (0 when the scope holds none)."""

    def __init__(self, scores=(), *, total: float = 0.0) -> None:
        super().__init__(scores)
        self.total = total


def counted_text_candidates(scope: Scope, *, query: str, k: int, size: int | None, counted: Future) -> TextScores:
    """`text_candidates` over a scope of `size` rows, counted first when not given (`scope_size`); the size is set
    on `counted` as soon as it is known, for the KNN that waits for it while this ranks."""
    try:
        size = scope_size(scope) if size is None else size
    except BaseException as error:
        counted.set_exception(error)
        raise
    counted.set_result(size)
    return text_candidates(scope, query=query, k=k, size=size)


def text_candidates(scope: Scope, *, query: str, k: int, size: int) -> TextScores:
    """Memories sharing words with the query, ranked by the summed IDF of the words they share (BM25 without its
    length normalisation, which on chat turns cost recall), and the query's whole word weight (the summed IDF of
    its words the scope holds: what a memory holding all of them scores). PostgreSQL's ts_rank has no IDF, so a
    speaker's name in half the turns would outweigh the one rare word that matters; document frequencies are taken
    within the scope (`size` rows).

    A scope of fewer than `text_sample` rows is counted exactly and every row sharing a word is ranked. On a larger
    one the words are counted over the first `text_sample` rows the scan finds, and only rows holding one of the
    rarest words, those estimated to fill `text_budget` rows between them, are ranked: a row sharing only common
    words with the query could not rank high anyway, and reading them all is what made text search slow on large
    scopes. The rare words' frequencies are then counted exactly over those rows (every row holding one is among
    them). When no row holds the words chosen (all missing from the sample, as a misspelt word is), the rarest word
    the sample held is ranked with them."""
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
            return TextScores()
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
                return TextScores()
            whole = " + ".join(weights.values())
            return _rank_text(cursor, scope, weights=weights, total=whole, match=list(weights), k=k, limit=None)
        total = max(size, seen)
        estimates = {term: max(count, 0.5) * total / seen for term, count in zip(terms, counts, strict=True)}
        ordered = sorted(terms, key=lambda term: estimates[term])
        match: list[str] = []
        spent = 0.0
        for term in ordered:
            if match and spent + estimates[term] > budget:
                break
            match.append(term)
            spent += estimates[term]
        ranked = {"terms": terms, "estimates": estimates, "total": total, "k": k, "limit": 2 * budget}
        scores = _rank_sampled(cursor, scope, match=match, **ranked)
        held = [term for term, count in zip(terms, counts, strict=True) if count and term not in match]
        if scores or not held:
            return scores
        # The words chosen were all missing from the sample, and are in no row either: the rarest word it held is
        # ranked with them.
        match.append(min(held, key=lambda term: estimates[term]))
        return _rank_sampled(cursor, scope, match=match, **ranked)


def _rank_sampled(
    cursor,
    scope: Scope,
    *,
    terms: list[str],
    estimates: dict[str, float],
    total: float,
    match: list[str],
    k: int,
    limit: int,
) -> TextScores:
    """`text_candidates` past the sample: at most `limit` rows holding one of `match`, the words of the query in
    `terms` weighed by their frequency counted over those rows (`match`) or estimated from the sample (the
    others)."""
    weights, held = {}, []
    for term in terms:
        if term in match:  # counted over the candidates, below
            i = match.index(term) + 1
            idf = f"ln(1 + ({total} - d.d[{i}] + 0.5) / (d.d[{i}] + 0.5))"
            weights[term] = f"(SELECT {idf} FROM d)"
            # A word no candidate holds is not part of the query's weight, as in an exact count.
            held.append(f"(SELECT CASE WHEN d.d[{i}] > 0 THEN {idf} ELSE 0 END FROM d)")
        else:
            weights[term] = f"{_idf(total, estimates[term])!r}::float8"
            held.append(weights[term])
    return _rank_text(cursor, scope, weights=weights, total=" + ".join(held), match=match, k=k, limit=limit)


def _rank_text(
    cursor, scope: Scope, *, weights: dict[str, str], total: str, match: list[str], k: int, limit: int | None
) -> TextScores:
    """Rows of the scope holding one of `match`, scored by the summed weight (an SQL expression) of the words they
    hold, with `total` (an SQL expression: the query's whole word weight). With a `limit` (a sampled scope) at most
    that many rows are read, and the frequencies of `match` are counted over them first, into CTE `d` that the
    weights may read as d.d[i] (i: the word's place in `match`, from 1). Each row's words are tested once, into a
    bit mask that the counts and the sums read. ts_rank_cd, which rewards the words standing close together, breaks
    ties among the best rows only."""
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
        f"WHERE {scope.where} AND {OWN_WORDS} @@ %s::tsquery {cap}){frequencies} "
        f"SELECT t.id, t.s + 0.001 * ts_rank_cd(t.v, %s::tsquery, 32) AS score, {total} "
        f"FROM (SELECT c.id, c.v, {sums} AS s FROM cand c ORDER BY s DESC, c.id LIMIT {2 * int(k)}) t "
        f"ORDER BY score DESC, t.id LIMIT {int(k)}",
        [*weights, *scope.params, f"{owner_word(scope.user_id)} & ({' | '.join(match)})", " | ".join(weights)],
    )
    rows = cursor.fetchall()
    return TextScores({pk: float(score) for pk, score, _ in rows}, total=float(rows[0][2]) if rows else 0.0)
