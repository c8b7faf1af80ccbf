"""The story page's timeline: a window of the chat's messages on a horizontal axis, its scenes as consecutive bands,
its threads (arcs) as bars over the messages they span, packed in lanes. Drawn twice, for a wide screen and a
phone's, so that its labels stay readable: each layout keeps only the labels that fit its width."""

from __future__ import annotations

from dataclasses import dataclass

from apps.common.exceptions import ApplicationError
from apps.extraction.services.story_pictures.geometry import Box, fit_text, text_box, text_width

WIDE, NARROW = 720, 340
ZOOMS = (500, 100)  # the windows offered besides the whole chat, in messages
LEAST = 10  # a window narrower than this is widened: one message as wide as the screen says nothing
PAD = 10
FONT = 11
TICK_BASELINE, AXIS_Y = 13, 20
BAND_TOP, BAND_H = 24, 26
LANE_TOP, LANE_H, LANE_GAP = 60, 18, 5
MAX_LANES = 8
NICE = (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000)


@dataclass(frozen=True)
class Span:
    """Messages [start, end) of the chat: a scene (`ref` its id), the messages since the last scene break (no
    `ref`), or a thread (`ref` its memory's id, `kind` "open" or "settled")."""

    start: int
    end: int
    label: str
    title: str
    kind: str = "scene"
    ref: int | None = None
    ongoing: bool = False


def _whole(value: str | None, field: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0:
        raise ApplicationError(f"“{field}” must be a message number (a whole number, 0 or more).", {"field": field})
    return number


def window_parse(*, count: int, start: str | None, end: str | None) -> tuple[int, int]:
    """The window of messages [start, end) asked for by `?from=&to=`: the whole chat when neither is given. A window
    past the chat's end slides back inside it (the chat may have shrunk since the link was made)."""
    first, last = _whole(start, "from"), _whole(end, "to")
    first = 0 if first is None else first
    if last is not None and last <= first:
        raise ApplicationError("“to” must be after “from”.", {"field": "to"})
    if count == 0:
        return 0, 0
    last = max(count, first + 1) if last is None else last
    size = min(max(last - first, LEAST), count)
    last = min(first + size, count)
    return max(0, last - size), last


def timeline_nav(*, count: int, start: int, end: int) -> dict:
    """The zoom choices (the whole chat, then windows of ZOOMS messages around the middle of this one) and the
    windows before and after this one, each as (from, to)."""
    size = end - start
    middle = (start + end) // 2
    zooms = [{"label": "Whole chat", "start": 0, "end": count, "current": size == count}]
    for zoom in ZOOMS:
        if zoom < count:
            first = min(max(0, middle - zoom // 2), count - zoom)
            zooms.append({"label": f"{zoom} messages", "start": first, "end": first + zoom, "current": size == zoom})
    earlier = (max(0, start - size), max(0, start - size) + size) if start > 0 else None
    later = (min(count, end + size) - size, min(count, end + size)) if end < count else None
    return {"zooms": zooms, "earlier": earlier, "later": later, "size": size}


def _step(per_message: float, end: int) -> int:
    room = text_width(f"#{end}", FONT) + 12
    return next((step for step in NICE if step * per_message >= room), NICE[-1])


def _ticks(start: int, end: int, width: int, x) -> list[dict]:
    per_message = (width - 2 * PAD) / (end - start)
    step = _step(per_message, end)
    ticks, last = [], None
    for index in range(-(-start // step) * step, end + 1, step):
        label = f"#{index}"
        w = text_width(label, FONT)
        lx = min(max(x(index), w / 2 + 1), width - w / 2 - 1)  # the first and the last kept inside the drawing
        box = text_box(lx, TICK_BASELINE, w, FONT, "middle")
        keep = last is None or not box.overlaps(last, pad=4)
        ticks.append({"x": x(index), "label": label if keep else "", "lx": round(lx, 1), "box": box if keep else None})
        last = box if keep else last
    return ticks


def _label(span: Span, x1: float, x2: float, top: float, height: float) -> dict:
    text = fit_text(span.label, FONT, x2 - x1 - 6)
    baseline = round(top + height / 2 + FONT * 0.36, 1)
    box = text_box(x1 + 3, baseline, text_width(text, FONT), FONT) if text else None
    return {"label": text, "lx": round(x1 + 3, 1), "ly": baseline, "box": box}


def _bar(span: Span, x1: float, x2: float, top: float, height: float, **extra) -> dict:
    return {
        "x": round(x1, 1),
        "y": top,
        "w": round(max(x2 - x1, 0.8), 1),
        "h": height,
        "title": span.title,
        "ref": span.ref,
        "kind": span.kind,
        "ongoing": span.ongoing,
        **_label(span, x1, x2, top, height),
        **extra,
    }


def timeline_layout(*, start: int, end: int, scenes: list[Span], arcs: list[Span], width: int) -> dict:
    """Everything the SVG draws for the window [start, end) at `width` (its viewBox), labels placed where they fit
    and left out where they would not."""
    scale = (width - 2 * PAD) / (end - start)

    def x(index: int) -> float:
        return round(PAD + (min(max(index, start), end) - start) * scale, 1)

    bands = [
        _bar(span, x(span.start), x(span.end), BAND_TOP, BAND_H, parity=ordinal % 2)
        for ordinal, span in enumerate(scenes)
        if span.end > start and span.start < end
    ]
    lanes: list[float] = []
    bars, left_out = [], 0
    for span in sorted((a for a in arcs if a.end > start and a.start < end), key=lambda a: (a.start, -a.end)):
        x1, x2 = x(span.start), x(span.end)
        lane = next((i for i, right in enumerate(lanes) if right + 3 <= x1), None)
        if lane is None and len(lanes) < MAX_LANES:
            lane = len(lanes)
            lanes.append(0)
        if lane is None:
            left_out += 1
            continue
        lanes[lane] = max(x2, x1 + 0.8)
        bars.append(_bar(span, x1, x2, LANE_TOP + lane * (LANE_H + LANE_GAP), LANE_H))
    height = LANE_TOP + len(lanes) * (LANE_H + LANE_GAP) if lanes else BAND_TOP + BAND_H + 6
    return {
        "width": width,
        "height": height,
        "axis": {"x1": PAD, "x2": width - PAD, "y": AXIS_Y, "t1": AXIS_Y - 3, "t2": AXIS_Y + 3},
        "ticks": _ticks(start, end, width, x),
        "bands": bands,
        "bars": bars,
        "left_out": left_out,
    }


def label_boxes(layout: dict) -> list[Box]:
    """Every label the layout keeps, as the box it takes (for the tests: none overlaps another, all inside)."""
    items = [*layout["ticks"], *layout["bands"], *layout["bars"]]
    return [item["box"] for item in items if item.get("box")]
