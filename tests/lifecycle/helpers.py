"""Lifecycle test helpers: vectors at a chosen cosine, so a pair's similarity is exactly what the test says."""

from __future__ import annotations

import math

from tests.memories.embedding_server import DIM

SUPERSESSION = "Answer UPDATE, DUPLICATE, INDEPENDENT or CONTRADICTS."


def at_cosine(cosine: float, *, axis: int = 0) -> list[float]:
    """A unit vector whose cosine to the unit vector of `axis` is `cosine` (the rest lies on the next axis)."""
    vector = [0.0] * DIM
    vector[axis] = cosine
    vector[(axis + 1) % DIM] = math.sqrt(max(0.0, 1 - cosine * cosine))
    return vector


def unit(axis: int) -> list[float]:
    return at_cosine(1.0, axis=axis)
