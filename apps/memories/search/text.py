"""The query and the memories as text: a query split into the sentences search embeds, and the excerpt of a long
memory a hit shows."""

from __future__ import annotations

import re

EXCERPT_CHARS = 2000
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)


def split_sentences(query: str, *, limit: int) -> list[str]:
    sentences = [s.strip() for s in _SENTENCE_END.split(query) if s and s.strip()]
    if len(sentences) > limit:
        # Keep the longest: a question's topic is rarely in the "Hi!" before it.
        keep = sorted(sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))[:limit])
        sentences = [sentences[i] for i in keep]
    return sentences


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
