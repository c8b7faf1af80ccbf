"""A search's work that needs no candidate, begun before the candidates are read: the query's vectors (its
sentences, each embedded by the user's model), the scope's count, the text ranking and the entities the query names.
The last three always run beside the search's own thread (apps/common/beside.py) while it embeds the query.

A reply's recall knows its search well before it runs it: the person's message is written, the chat read and the
memory gathered first. `search_ahead` begins all four then, beside that work, and the search takes them when they
are the ones it would begin itself: the same user, query, scope and number of candidates, and for the vectors the
same model. Anything else (another search, the model changed meanwhile, the embedding beside failing) and the search
begins its own, as it always did. What was begun ahead is held for the caller's thread until its block ends."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractUser

from apps.common.beside import beside, beside_committed
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import EmbeddingConfig, config_for, embed_query, reads_words
from apps.memories.models import Kind
from apps.memories.search.candidates import Scope, TextScores, counted_text_candidates
from apps.memories.search.named import entities_named

log = logging.getLogger(__name__)
MAX_LIMIT = 100
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
Vectors = list[list[float]] | None
_held = threading.local()  # `.ahead`: (the search's key, its Begun), begun by search_ahead in this thread


def split_sentences(query: str, *, limit: int) -> list[str]:
    sentences = [s.strip() for s in _SENTENCE_END.split(query) if s and s.strip()]
    if len(sentences) > limit:
        # Keep the longest: a question's topic is rarely in the "Hi!" before it.
        keep = sorted(sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))[:limit])
        sentences = [sentences[i] for i in keep]
    return sentences


def query_normal(query: str) -> str:
    return query.replace("\x00", "").strip()


@dataclass
class Begun:
    counted: Future[int]  # the scope's size, set as soon as it is known (the KNN waits for it)
    text_ranked: Future[TextScores]
    named_entities: Future[list[int]]
    vectors: Future[tuple[str, Vectors]] | None = None  # embedded ahead, with its model's key

    def vectors_by(self, embedding: EmbeddingConfig, query: str) -> Vectors:
        """The query's vectors by `embedding`, the user's model: those embedded ahead by it, else made now."""
        if self.vectors is not None:
            try:
                key, vectors = self.vectors.result()
            except Exception:  # the work beside failed (its connection, say): embedding here says what fails
                log.warning("the query embedded ahead failed; embedding it now", exc_info=True)
            else:
                if key == embedding.key:
                    return vectors
        return query_vectors(embedding, query)


def query_vectors(embedding: EmbeddingConfig, query: str) -> Vectors:
    """The vectors of the query's sentences (None: no vector possible, search ranks by words alone)."""
    config = settings.LOREKEEPER_SEARCH
    if config["meaning_needs_a_known_word"] and not reads_words(embedding, query):
        return None
    return embed_query(embedding, split_sentences(query, limit=config["max_sentences"]) or [query])


def _key(user: AbstractUser, scope: Scope, query: str, k: int) -> tuple:
    return user.pk, query, tuple(scope.sql), repr(scope.params), k


def search_begin(
    *, user: AbstractUser, scope: Scope, query: str, k: int, scope_rows: int | None, committed: bool
) -> Begun:
    """The search's work that needs no vector: begun ahead for it in this thread, else begun now beside (outside
    a transaction, or `committed`: inside one that wrote none of the scope's memories and entities)."""
    held = getattr(_held, "ahead", None)
    if held is not None and held[0] == _key(user, scope, query, k):
        _held.ahead = None
        return held[1]
    return _begin(user, scope, query, k, scope_rows, committed)


def _begin(user: AbstractUser, scope: Scope, query: str, k: int, scope_rows: int | None, committed: bool) -> Begun:
    alongside = beside_committed if committed else beside
    counted: Future[int] = Future()
    text_ranked = alongside(counted_text_candidates, scope, query=query, k=k, size=scope_rows, counted=counted)
    named = alongside(entities_named, user=user, query=query, character_ids=scope.character_ids)
    return Begun(counted, text_ranked, named)


@contextmanager
def search_ahead(*, user: AbstractUser, scope: Scope, query: str, k: int) -> Iterator[None]:
    """Begin a search of committed memories beside the block's work, which it needs none of (whether the user set
    a model of their own and the cache are read as committed too); the block's search of the same query, scope and
    `k` takes it. Whatever the block did not take is let go at its end."""
    begun = _begin(user, scope, query, k, None, True)
    begun.vectors = beside_committed(_embedded, user, query)
    _held.ahead = (_key(user, scope, query, k), begun)
    try:
        yield
    finally:
        _held.ahead = None


def _embedded(user: AbstractUser, query: str) -> tuple[str, Vectors]:
    embedding = config_for(user)
    return embedding.key, query_vectors(embedding, query)


def search_asked(*, user, query, character_id, chat_id, chat_characters, kinds, limit, include_retired):
    """The query, limit, scope and number of candidates of a search: checked, as a search and its beginning ahead
    ask them alike."""
    query = query_normal(query)
    if not query:
        raise ApplicationError("Give a query to search for.", {"field": "query"})
    unknown = [k for k in kinds or [] if k not in Kind.values]
    if unknown:
        raise ApplicationError("Unknown memory kind(s).", {"field": "kinds", "kinds": unknown})
    limit = max(1, min(int(limit), MAX_LIMIT))
    scope = Scope(
        user=user, character_id=character_id, chat_id=chat_id, kinds=kinds, include_retired=include_retired,
        chat_characters=chat_characters,
    )  # fmt: skip
    return query, limit, scope, max(settings.LOREKEEPER_SEARCH["candidates"], limit * 2)


def memory_search_ahead(
    *,
    user: AbstractUser,
    query: str,
    chat_id: int | None = None,
    chat_characters: list[int] | None = None,
    kinds: list[str] | None = None,
    limit: int = 10,
    character_id: int | None = None,
    include_retired: bool = False,
) -> AbstractContextManager[None]:
    """The block's `memory_search` with these arguments, begun beside the block's work (search_ahead):
    a search of committed memories, its query written before the block searches (a reply's recall)."""
    query, limit, scope, k = search_asked(
        user=user, query=query, character_id=character_id, chat_id=chat_id, chat_characters=chat_characters,
        kinds=kinds, limit=limit, include_retired=include_retired,
    )  # fmt: skip
    return search_ahead(user=user, scope=scope, query=query, k=k)
