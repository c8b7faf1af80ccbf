"""Vectorized entries activated by meaning (docs/LOREBOOKS.md, "Vectorized entries"): what SillyTavern's Vector
Storage does for an entry flagged `vectorized`, done with the relevance of Lorekeeper's memory search
(apps/memories/search/ranking.py, docs/SEARCH.md) and its rule that nothing matches when nothing is near.

The query is the chat's newest messages (as many as the scan depth); each of its sentences (at most five) is
embedded with the account's embedding model, and each vectorized entry's content too (cached). An entry's
relevance is, as a memory's:

    relevance = (text weight · words + vector weight · meaning) / (text weight + vector weight)

- words: the share of the query's word weight the entry holds (each word weighs its rarity among the vectorized
  entries, IDF; stemmed as PostgreSQL stems the memories' text);
- meaning: the best cosine similarity over the query's sentences, from the model's floor (0) to identical (1);
  0 under the floor.

With no vector possible (embeddings off, the provider down, a query the local model reads no word of) relevance is
the words alone. An entry activates from relevance above 0 (and the search's `min_score`, when one is set): one that
shares no word with the chat and comes close to none of its sentences does not activate.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import connection

from apps.lorebooks.models import Lorebook
from apps.memories.embeddings import EmbeddingUnavailable, config_for, embed_query, embed_texts, reads_words
from apps.memories.models import SEARCH_CONFIG
from apps.memories.search.candidates import MAX_QUERY_LEXEMES
from apps.memories.search.text import split_sentences

log = logging.getLogger(__name__)

# Entries compared by meaning at most: an entry's vector is made in the background when its book is written
# (vectors_prepare), else the first time it is compared (then cached), in the request that asks, so a book of
# thousands of vectorized entries would hold a reply for minutes. Past this many, their words alone decide, and the
# log says so.
MEANING_MAX = 500


LEXEME_CACHE = 50_000  # texts whose stemmed words a process keeps (an entry's are worked out once, not per search)
_lexeme_cache: dict[bytes, list[str]] = {}
_lexeme_lock = threading.Lock()


def _lexemes(texts: list[str]) -> list[list[str]]:
    """Each text's distinct stemmed words, in the order they first come (PostgreSQL's, as memories are searched).
    Entries' words are kept per process: a search over thousands of entries asks PostgreSQL only for the new ones."""
    keys = [hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).digest() for text in texts]
    with _lexeme_lock:
        known = {key: _lexeme_cache[key] for key in keys if key in _lexeme_cache}
    missing = list({key: text for key, text in zip(keys, texts, strict=True) if key not in known}.items())
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT n, ARRAY(SELECT lexeme FROM unnest(to_tsvector('{SEARCH_CONFIG}', t)) ORDER BY positions[1], "
                f"lexeme) FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n",
                [[text for _, text in missing]],
            )
            found = {missing[n - 1][0]: list(words) for n, words in cursor.fetchall()}
        known.update(found)
        with _lexeme_lock:
            for key, words in found.items():
                if len(_lexeme_cache) >= LEXEME_CACHE:
                    _lexeme_cache.pop(next(iter(_lexeme_cache)))
                _lexeme_cache[key] = words
    return [known[key] for key in keys]


def _idf(total: float, df: float) -> float:
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


def _words(query_words: list[str], entry_words: list[list[str]]) -> list[float]:
    held = [set(words) for words in entry_words]
    weights = {}
    for word in query_words[:MAX_QUERY_LEXEMES]:
        df = sum(word in words for words in held)
        if df:
            weights[word] = _idf(len(held), df)
    total = sum(weights.values())
    if not total:
        return [0.0] * len(held)
    return [sum(weight for word, weight in weights.items() if word in words) / total for words in held]


def _meaning(user: AbstractUser, query: str, contents: list[str], config: dict) -> list[float] | None:
    embedding = config_for(user)
    if not embedding.enabled:
        return None
    if config["meaning_needs_a_known_word"] and not reads_words(embedding, query):
        return None
    sentences = split_sentences(query, limit=config["max_sentences"]) or [query]
    asked = embed_query(embedding, sentences)
    if not asked:
        return None
    try:
        vectors = embed_texts(embedding, contents)
    except EmbeddingUnavailable as error:
        log.warning("vectorized entries by their words alone: %s", error)
        return None
    floor = config["min_similarity_by_model"].get(embedding.key, config["min_similarity"])
    span = max(1.0 - floor, 1e-9)
    queries, entries = np.asarray(asked, dtype=np.float32), np.asarray(vectors, dtype=np.float32)
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    entries /= np.maximum(np.linalg.norm(entries, axis=1, keepdims=True), 1e-12)
    best = (entries @ queries.T).max(axis=1)
    return [max(float(similarity) - floor, 0.0) / span if similarity >= floor else 0.0 for similarity in best]


def vectors_prepare(*, book_id: int) -> int:
    """Embed the book's vectorized entries ahead of the chats that compare them (the embedding cache keeps their
    vectors, keyed by their text), so that the first reply after an import or an edit does not wait on them. At
    most MEANING_MAX of them: past that many, words alone decide. Answers how many were asked for (those already
    cached cost nothing)."""
    book = Lorebook.objects.select_related("user").filter(pk=book_id).first()
    if book is None:
        return 0
    texts = [
        entry.data["content"]
        for entry in book.entries.order_by("uid")
        if entry.data.get("vectorized") and (entry.data.get("content") or "").strip()
    ][:MEANING_MAX]
    embedding = config_for(book.user)
    if not texts or not embedding.enabled:
        return 0
    try:
        embed_texts(embedding, texts)
    except EmbeddingUnavailable as error:
        log.warning("the vectorized entries of book %s wait for their first use: %s", book_id, error)
        return 0
    return len(texts)


def entries_relevance(*, user: AbstractUser, query: str, texts: list[str], meaning: bool = True) -> list[float]:
    """Each text's relevance to `query` (0: no word shared, nothing near), as described above; `meaning` False:
    by the words alone."""
    config = settings.LOREKEEPER_SEARCH
    query = query.replace("\x00", "").strip()
    texts = [text.replace("\x00", "") for text in texts]
    if not query or not texts:
        return [0.0] * len(texts)
    query_words, *text_words = _lexemes([query, *texts])
    words = _words(query_words, text_words)
    near = _meaning(user, query, texts, config) if meaning else None
    if near is None:
        return words
    weights = config["fusion"]
    total = (weights["text"] + weights["vector"]) or 1.0
    return [
        (weights["text"] * word + weights["vector"] * close) / total for word, close in zip(words, near, strict=True)
    ]


def entries_by_meaning(
    *, user: AbstractUser, query: str, entries: list[tuple[str, dict[str, Any]]]
) -> dict[tuple[str, Any], float]:
    """(book, uid) → relevance of each of the vectorized `entries` ((book name, entry)) that the chat's newest
    messages (`query`) match; the others are left out."""
    entries = [(book, entry) for book, entry in entries if (entry.get("content") or "").strip()]
    if not entries:
        return {}
    config = settings.LOREKEEPER_SEARCH
    by_meaning = len(entries) <= MEANING_MAX
    if not by_meaning:
        log.warning("%d vectorized entries: by their words alone (at most %d by meaning)", len(entries), MEANING_MAX)
    texts = [entry["content"] for _, entry in entries]
    relevance = entries_relevance(user=user, query=query, texts=texts, meaning=by_meaning)
    least = config["min_score"]
    return {
        (book, entry["uid"]): value
        for (book, entry), value in zip(entries, relevance, strict=True)
        if value > 0 and config["weights"]["relevance"] * value >= least
    }
