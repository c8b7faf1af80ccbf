"""Boxes and text widths for the story page's drawings: the server lays out every label of an SVG, so it estimates
how wide a string is set in the page's sans-serif and keeps the labels that fit."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

ELLIPSIS = "…"
# Advance widths in ems of a system sans-serif (DejaVu Sans, the widest of the usual ones), by class of character,
# rounded up: a label is allowed a little more room than it needs rather than too little.
NARROW = set("iljI.,:;'|!")
SLIM = set("tfr()[] ")
WIDE = set("mwMW@%")


@dataclass(frozen=True)
class Box:
    """An axis-aligned rectangle: (x, y) its top left corner."""

    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    def overlaps(self, other: Box, pad: float = 0.0) -> bool:
        return (
            self.x < other.right + pad
            and other.x < self.right + pad
            and self.y < other.bottom + pad
            and other.y < self.bottom + pad
        )

    def inside(self, width: float, height: float) -> bool:
        return self.x >= 0 and self.y >= 0 and self.right <= width and self.bottom <= height


def _em(char: str) -> float:
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return 1.0
    if char in NARROW:
        return 0.3
    if char in SLIM:
        return 0.42
    if char in WIDE:
        return 0.95
    if char.isupper() or char.isdigit():
        return 0.72
    return 0.62


def text_width(text: str, size: float) -> float:
    """How wide `text` is, set at `size` (an estimate a little on the wide side)."""
    return round(sum(_em(c) for c in text) * size, 1)


def fit_text(text: str, size: float, room: float, *, least: int = 3) -> str:
    """`text` if it fits in `room`, else its start and an ellipsis; empty when not even `least` characters fit."""
    text = " ".join(text.split())
    if text_width(text, size) <= room:
        return text
    budget = room - text_width(ELLIPSIS, size)
    kept = ""
    for char in text:
        if text_width(kept + char, size) > budget:
            break
        kept += char
    kept = kept.rstrip(" ,·-")
    return kept + ELLIPSIS if len(kept) >= least else ""


def text_box(x: float, baseline: float, width: float, size: float, anchor: str = "start") -> Box:
    """The box a label takes: its ascenders above the baseline, its descenders below."""
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return Box(round(left, 1), round(baseline - size * 0.92, 1), width, round(size * 1.18, 1))
