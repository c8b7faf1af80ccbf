"""Memory search: `memory_search` (ranking.py) fuses the candidate rankings of candidates.py; query.py begins the
work that needs no candidate (the query's vectors among it), ahead of the search for a reply's recall."""

from apps.memories.search.query import MAX_LIMIT, memory_search_ahead, split_sentences
from apps.memories.search.ranking import SearchHit, SearchOutcome, excerpt, memory_search

__all__ = [
    "MAX_LIMIT",
    "SearchHit",
    "SearchOutcome",
    "excerpt",
    "memory_search",
    "memory_search_ahead",
    "split_sentences",
]
