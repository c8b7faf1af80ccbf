"""The story page's relationship graph: the characters on a circle, their names outside it, an arrow for each
current relationship reading (who feels what towards whom); the two arrows of a pair that feel something for each
other bow apart. Each arrow is labelled with its descriptors and confidence where a label fits: on the arrow, clear
of the characters, their names and the other labels; else shortened, else left out (the arrow's tooltip and the
list under the drawing have the whole reading)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from apps.extraction.services.story_pictures.geometry import Box, fit_text, text_box, text_width

FONT, NAME_FONT = 11, 12
NODE_R = 14
NAME_ROOM = 90  # the widest a name may be drawn
WORD_ROOM = 96  # and a descriptor, in a label
MAX_NODES = 12
BOW = 0.16  # how far the arrows of a pair bow apart, as a share of their length
SPOTS = (0.5, 0.4, 0.6, 0.32, 0.68, 0.25, 0.75)  # where along its arrow a label may sit, best first
GAPS = (None, 2, 9)  # on the arrow, then beside it: this far off


@dataclass(frozen=True)
class Relation:
    """One current reading: how `source` stands with `target` (`descriptors` short words, first the strongest)."""

    source: str
    target: str
    descriptors: tuple[str, ...]
    confidence: float
    title: str
    ref: int


def _size(count: int) -> tuple[int, int]:
    width = 360 if count <= 3 else min(600, 400 + 40 * (count - 4))
    return width, (160 if count <= 2 else round(width * 0.8))


def _nodes(relations: list[Relation]) -> list[str]:
    """The characters, the most connected first (at most MAX_NODES), then placed around the circle by name."""
    degree: dict[str, int] = {}
    for relation in relations:
        for name in (relation.source, relation.target):
            degree[name] = degree.get(name, 0) + 1
    kept = sorted(degree, key=lambda name: (-degree[name], name.lower()))[:MAX_NODES]
    return sorted(kept, key=str.lower)


def _name_box(x: float, y: float, cos: float, sin: float, width: float) -> tuple[str, float, float, Box]:
    """Where a character's name goes: outside the circle, away from the arrows, which all run inwards."""
    if abs(cos) < 0.35:
        baseline = y - NODE_R - 7 if sin < 0 else y + NODE_R + NAME_FONT + 1
        anchor, lx = "middle", x
    else:
        anchor, lx = ("end", x - NODE_R - 5) if cos < 0 else ("start", x + NODE_R + 5)
        baseline = y + NAME_FONT * 0.35
    return anchor, round(lx, 1), round(baseline, 1), text_box(lx, baseline, width, NAME_FONT, anchor)


def _place_nodes(names: list[str], width: int, height: int) -> list[dict]:
    count = len(names)
    start = math.pi if count == 2 else -math.pi / 2
    angles = [start + 2 * math.pi * i / count for i in range(count)]
    xs, ys = [math.cos(a) for a in angles], [math.sin(a) for a in angles]
    names_at_side = any(abs(c) >= 0.35 for c in xs)
    widest = max(text_width(fit_text(name, NAME_FONT, NAME_ROOM, least=1), NAME_FONT) for name in names)
    side = NODE_R + 8 + widest if names_at_side else max(NODE_R, widest / 2) + 4
    top = bottom = NODE_R + 8 + NAME_FONT
    # As large a circle as the drawing holds, the names inside the drawing.
    spread_x, spread_y = max(xs) - min(xs), max(ys) - min(ys)
    radius = (width - 2 * side) / spread_x
    if spread_y > 0.01:
        radius = min(radius, (height - top - bottom) / spread_y)
    cx = side - radius * min(xs) + ((width - 2 * side) - radius * spread_x) / 2
    cy = height / 2 if spread_y <= 0.01 else top - radius * min(ys) + ((height - top - bottom) - radius * spread_y) / 2
    # Neighbours' names side by side: each no wider than the room between them.
    room = min(NAME_ROOM, 2 * radius * math.sin(math.pi / count) - 10) if count > 2 else NAME_ROOM
    nodes = []
    for name, cos, sin in zip(names, xs, ys, strict=True):
        x, y = round(cx + radius * cos, 1), round(cy + radius * sin, 1)
        label = fit_text(name, NAME_FONT, room, least=1) or name[:1]
        anchor, lx, ly, box = _name_box(x, y, cos, sin, text_width(label, NAME_FONT))
        disc = Box(x - NODE_R - 2, y - NODE_R - 2, 2 * NODE_R + 4, 2 * NODE_R + 4)
        nodes.append(
            {"name": name, "label": label, "x": x, "y": y, "anchor": anchor, "lx": lx, "ly": ly}
            | {"box": box, "disc": disc}
        )
    return nodes


def _label_texts(relation: Relation) -> list[str]:
    """The label, then shorter ones: two descriptors, one, one cut short, the confidence alone."""
    confidence = f"{relation.confidence:.1f}"
    words = [word for word in (fit_text(d, FONT, WORD_ROOM, least=2) for d in relation.descriptors[:2]) if word]
    texts = [f"{', '.join(words)} · {confidence}"] if words else []
    if words:
        texts += [f"{words[0]} · {confidence}", f"{fit_text(words[0], FONT, WORD_ROOM / 2, least=2)} · {confidence}"]
    texts.append(confidence)
    return [text for i, text in enumerate(texts) if text and text not in texts[:i] and not text.startswith(" ·")]


def _point(curve: tuple, t: float) -> tuple[float, float]:
    (x1, y1), (qx, qy), (x2, y2) = curve
    return (
        (1 - t) ** 2 * x1 + 2 * (1 - t) * t * qx + t**2 * x2,
        (1 - t) ** 2 * y1 + 2 * (1 - t) * t * qy + t**2 * y2,
    )


def _place_label(texts: list[str], curve: tuple, normal: tuple, sides: tuple, taken: list[Box], size: tuple):
    """The first text, spot and offset whose box is inside the drawing and clear of everything placed."""
    nx, ny = normal
    h = FONT * 1.18
    for text in texts:
        w = text_width(text, FONT)
        reach = abs(nx) * w / 2 + abs(ny) * h / 2
        for spot in SPOTS:
            px, py = _point(curve, spot)
            for gap in GAPS:
                for side in (0,) if gap is None else sides:
                    off = side * ((gap or 0) + reach)
                    cx, cy = px + nx * off, py + ny * off
                    baseline = round(cy + FONT * 0.33, 1)
                    box = text_box(round(cx, 1), baseline, w, FONT, "middle")
                    inside = box.x >= 2 and box.y >= 2 and box.right <= size[0] - 2 and box.bottom <= size[1] - 2
                    if inside and not any(box.overlaps(other, pad=2) for other in taken):
                        return text, round(cx, 1), baseline, box
    return "", 0, 0, None


def _curve(a: dict, b: dict, bow: float) -> tuple:
    """The arrow from a to b: a quadratic curve bowed `bow` to its right, from the edge of a's disc to the edge of
    b's (where the arrowhead's tip goes)."""
    length = math.hypot(b["x"] - a["x"], b["y"] - a["y"])
    ux, uy = (b["x"] - a["x"]) / length, (b["y"] - a["y"]) / length
    nx, ny = -uy, ux  # to the arrow's right, on screen (y grows downwards)
    qx, qy = (a["x"] + b["x"]) / 2 + nx * bow * length, (a["y"] + b["y"]) / 2 + ny * bow * length
    ends = []
    for node, gap in ((a, NODE_R + 2), (b, NODE_R + 3)):
        dx, dy = qx - node["x"], qy - node["y"]
        d = math.hypot(dx, dy)
        ends.append((round(node["x"] + dx / d * gap, 1), round(node["y"] + dy / d * gap, 1)))
    return (ends[0], (round(qx, 1), round(qy, 1)), ends[1]), (nx, ny)


def graph_layout(*, relations: list[Relation]) -> dict:
    """Positions for the characters and the arrows between them, each arrow's label placed or left out."""
    relations = [r for r in relations if r.source and r.target and r.source != r.target]
    names = _nodes(relations)
    if len(names) < 2:
        return {"nodes": [], "edges": [], "width": 0, "height": 0, "left_out": len(relations), "unlabelled": 0}
    width, height = _size(len(names))
    nodes = {node["name"]: node for node in _place_nodes(names, width, height)}
    drawn = [r for r in relations if r.source in nodes and r.target in nodes]
    pairs = {(r.source, r.target) for r in drawn}
    taken = [node[key] for node in nodes.values() for key in ("disc", "box")]
    edges = []
    for relation in drawn:
        both = (relation.target, relation.source) in pairs
        curve, normal = _curve(nodes[relation.source], nodes[relation.target], BOW if both else 0)
        # A pair's two arrows keep their labels on their own outer sides, so that each label sits by its arrow.
        sides = (1,) if both else (1, -1)
        label, lx, ly, box = _place_label(_label_texts(relation), curve, normal, sides, taken, (width, height))
        if box:
            taken.append(box)
        (x1, y1), (qx, qy), (x2, y2) = curve
        edges.append(
            {"x1": x1, "y1": y1, "qx": qx, "qy": qy, "x2": x2, "y2": y2, "label": label, "lx": lx, "ly": ly}
            | {"box": box, "title": relation.title, "ref": relation.ref}
        )
    return {
        "nodes": list(nodes.values()),
        "edges": edges,
        "width": width,
        "height": height,
        "left_out": len(relations) - len(drawn),
        "unlabelled": sum(1 for edge in edges if not edge["label"]),
    }
