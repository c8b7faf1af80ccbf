"""Memory search: `memory_search` (ranking.py) fuses the candidate rankings of candidates.py."""

from apps.memories.search.ranking import MAX_LIMIT, SearchHit, SearchOutcome, memory_search
from apps.memories.search.text import excerpt, split_sentences

__all__ = ["MAX_LIMIT", "SearchHit", "SearchOutcome", "excerpt", "memory_search", "split_sentences"]
