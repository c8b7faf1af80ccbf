"""Where the recall card draws a recall's subgraph (templates/injection/partials/recall_graph.html): its memories on
an inner ring, the entities they name on an outer one, each label beside its node on the side away from the centre.

A label's size is estimated (characters × the font's average width), so it is shortened to fit (the full text stays
in the node's <title>) and moved when it would cover another label or a node: pushed further out, then shorter; when
no place is free the rings grow and the layout starts again. The drawing is as large as what it holds, labels
included, so nothing is cut at its edge."""

from __future__ import annotations

import math
from dataclasses import dataclass

FONT_SIZE = 11  # px: static/css/app.css, `svg.subgraph .node text`
CHAR_WIDTH = 0.6 * FONT_SIZE  # an average sans-serif character, a little generous
ASCENT, DESCENT = FONT_SIZE, 0.3 * FONT_SIZE  # a label's box above and below its baseline
NODE_RADIUS = {"memory": 15, "entity": 11}
GAP = 4  # between a node and its label, and kept free around every label
MARGIN = 8
MIN_WIDTH, MIN_HEIGHT = 240, 120
# Where a label may go, in order of preference: (at most this many characters, pushed out by this many lines).
PLACES = ((18, 0), (18, 1), (12, 0), (12, 1), (18, 2), (12, 2), (7, 0), (7, 1), (7, 2), (7, 3))
GROWTH, TRIES = 1.2, 20
MAX_NODES = 60  # a recall chooses a few memories; a record written elsewhere may hold more than a card can show


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: Box, gap: float = 0.0) -> bool:
        return not (
            self.right + gap <= other.left
            or other.right + gap <= self.left
            or self.bottom + gap <= other.top
            or other.bottom + gap <= self.top
        )


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word where one ends late enough, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-") + "…"


def _label(x: float, y: float, r: float, ux: float, uy: float, text: str, push: int) -> tuple[Box, str, float, float]:
    """A label of `text` beside the node at (x, y), on its side along the outward direction (ux, uy), pushed out by
    `push` lines: its box, its text-anchor, and the point the text is drawn from (x, baseline)."""
    width, height = len(text) * CHAR_WIDTH, ASCENT + DESCENT
    x, y = x + ux * push * height, y + uy * push * height
    if abs(ux) > 0.38:  # beside the node, reading away from it
        middle = y + uy * r * 0.8
        top = middle - height / 2
        if ux > 0:
            left, anchor, at = x + r + GAP, "start", x + r + GAP
        else:
            left, anchor, at = x - r - GAP - width, "end", x - r - GAP
    else:  # above or below it, centred
        left, anchor, at = x + ux * r - width / 2, "middle", x + ux * r
        top = y + r + GAP if uy >= 0 else y - r - GAP - height
    return Box(left, top, left + width, top + height), anchor, at, top + ASCENT


def _rings(memories: list[dict], entities: list[dict], scale: float) -> dict[str, tuple[float, float]]:
    """Positions around (0, 0): memories on the inner ring (a lone one at the centre), entities on the outer ring in
    the order given (graph_layout orders them by the memory that first names them, so that lines cross less)."""
    positions: dict[str, tuple[float, float]] = {}
    n_m, n_e = len(memories), len(entities)
    spacing = 2 * (NODE_RADIUS["memory"] + GAP)
    inner = 0.0 if n_m <= 1 else max(60.0, n_m * spacing / (2 * math.pi))
    outer = 0.0 if n_m == 0 and n_e == 1 else max(inner + 75.0, n_e * spacing / (2 * math.pi))
    inner, outer = inner * scale, outer * scale
    for ring, radius, start in (
        (memories, inner, -math.pi / 2),
        (entities, outer, -math.pi / 2 + math.pi / max(n_e, 2)),
    ):
        for i, node in enumerate(ring):
            angle = start + 2 * math.pi * i / max(len(ring), 1)
            positions[node["id"]] = (radius * math.cos(angle), radius * math.sin(angle))
    return positions


def _place(nodes: list[dict], positions: dict[str, tuple[float, float]]) -> list[dict] | None:
    """Each node with its label at the first free place, or None when one finds none."""
    squares = {
        node["id"]: Box(x - r, y - r, x + r, y + r)
        for node in nodes
        for (x, y), r in [(positions[node["id"]], NODE_RADIUS[node["type"]])]
    }
    taken: list[Box] = []
    placed = []
    for node in nodes:
        x, y = positions[node["id"]]
        r = NODE_RADIUS[node["type"]]
        distance = math.hypot(x, y)
        ux, uy = (x / distance, y / distance) if distance > 1e-6 else (0.0, 1.0)
        for limit, push in PLACES:
            text = shorten(node.get("label", ""), limit)
            box, anchor, at, baseline = _label(x, y, r, ux, uy, text, push)
            if any(box.overlaps(other, GAP) for other in taken) or any(
                box.overlaps(square, GAP) for square in squares.values()
            ):
                continue
            taken.append(box)
            placed.append(
                {
                    **node,
                    "x": x,
                    "y": y,
                    "r": r,
                    "short": text,
                    "anchor": anchor,
                    "label_x": at,
                    "label_y": baseline,
                    "box": box,
                }
            )
            break
        else:
            return None
    return placed


def _listed(subgraph: dict, key: str) -> list[dict]:
    """The record's nodes or edges, each a dict (a record may come from a client: nothing in it is trusted)."""
    items = subgraph.get(key)
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def graph_layout(subgraph: dict) -> dict:
    """The recall's subgraph ready to draw: each node with its position, radius, shortened label and where that
    label goes; each edge with its ends' positions; the drawing's width and height."""
    subgraph = subgraph if isinstance(subgraph, dict) else {}
    drawable: dict[str, dict] = {}  # each id once, as first listed
    for n in _listed(subgraph, "nodes"):
        # An id a node's link can carry (a path segment), and a type that is a name (a list is no key to look up).
        if not (isinstance(n.get("id"), str) and n["id"] and "/" not in n["id"] and isinstance(n.get("type"), str)):
            continue
        if n["type"] in NODE_RADIUS and n["id"] not in drawable:
            drawable[n["id"]] = n | {"label": str(n.get("label") or "")}
    memories = [n for n in drawable.values() if n["type"] == "memory"][:MAX_NODES]
    first_named: dict[str, int] = {}
    order = {n["id"]: i for i, n in enumerate(memories)}
    # Each end an id (a string), as nodes' are: a list would be no id, nor a key to look up.
    edges = [
        e for e in _listed(subgraph, "edges") if isinstance(e.get("source"), str) and isinstance(e.get("target"), str)
    ]
    for edge in edges:
        if edge["source"] in order:
            first_named.setdefault(edge["target"], order[edge["source"]])
    entities = sorted(
        (n for n in drawable.values() if n["type"] == "entity"), key=lambda n: first_named.get(n["id"], len(memories))
    )[: MAX_NODES - len(memories)]
    nodes = memories + entities
    scale, placed = 1.0, None
    for _ in range(TRIES):
        placed = _place(nodes, _rings(memories, entities, scale))
        if placed is not None:
            break
        scale *= GROWTH
    if placed is None:  # never seen: the rings grow until every label has room
        raise RuntimeError("The recall graph found no room for its labels.")
    return _framed(placed, edges) | {"hidden": len(drawable) - len(nodes)}


def _framed(placed: list[dict], edges: list[dict]) -> dict:
    """Moved so that every node and label lies inside the drawing, with a margin; centred when the drawing is
    smaller than its minimum size."""
    boxes = [n["box"] for n in placed] + [
        Box(n["x"] - n["r"], n["y"] - n["r"], n["x"] + n["r"], n["y"] + n["r"]) for n in placed
    ]
    left = min((b.left for b in boxes), default=0.0)
    top = min((b.top for b in boxes), default=0.0)
    content_w = max((b.right for b in boxes), default=0.0) - left
    content_h = max((b.bottom for b in boxes), default=0.0) - top
    width = math.ceil(max(MIN_WIDTH, content_w + 2 * MARGIN))
    height = math.ceil(max(MIN_HEIGHT, content_h + 2 * MARGIN))
    dx = (width - content_w) / 2 - left
    dy = (height - content_h) / 2 - top
    nodes = {}
    for node in placed:
        del node["box"]
        nodes[node["id"]] = node | {
            "x": round(node["x"] + dx, 1),
            "y": round(node["y"] + dy, 1),
            "label_x": round(node["label_x"] + dx, 1),
            "label_y": round(node["label_y"] + dy, 1),
        }
    lines = [
        {**edge, "x1": a["x"], "y1": a["y"], "x2": b["x"], "y2": b["y"]}
        for edge in edges
        if (a := nodes.get(edge.get("source"))) and (b := nodes.get(edge.get("target")))
    ]
    return {"nodes": list(nodes.values()), "edges": lines, "width": width, "height": height}
