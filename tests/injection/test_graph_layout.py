"""The recall graph's layout (apps/injection/services/graph_layout.py): whatever the number of nodes, no label covers
another label or a node, and everything lies inside the drawing. A label's box is estimated here from its characters
and the font size the stylesheet gives it, independently of the layout's own bookkeeping."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from apps.injection.services.graph_layout import FONT_SIZE, graph_layout, shorten

ROOT = Path(__file__).resolve().parent.parent.parent
WORDS = "the lantern went out at midnight when old Corvin climbed the tower with a single match".split()
NAMES = ["Mira", "Old Corvin of the Lantern Tower", "Biscuit", "WWWWWWWWWWWWWWWWWWWWWWWW", "X", "The Seal"]


def subgraph(memories: int, entities: int) -> dict:
    nodes = [
        {"id": f"m{i}", "type": "memory", "label": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(14))}
        for i in range(memories)
    ]
    nodes += [{"id": f"e{i}", "type": "entity", "label": NAMES[i % len(NAMES)]} for i in range(entities)]
    edges = [
        {"source": f"m{i % memories}", "target": f"e{i}", "kind": "mentions"} for i in range(entities) if memories
    ]
    edges += [{"source": f"m{i}", "target": f"m{i + 1}", "kind": "supersedes"} for i in range(memories - 1)]
    return {"nodes": nodes, "edges": edges}


def label_box(node: dict) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a label: 0.6 em a character, 1 em above the baseline and 0.3 em below."""
    width = len(node["short"]) * 0.6 * FONT_SIZE
    left = {"start": 0, "middle": -width / 2, "end": -width}[node["anchor"]] + node["label_x"]
    return left, node["label_y"] - FONT_SIZE, left + width, node["label_y"] + 0.3 * FONT_SIZE


def node_box(node: dict) -> tuple[float, float, float, float]:
    return node["x"] - node["r"], node["y"] - node["r"], node["x"] + node["r"], node["y"] + node["r"]


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize(
    "memories, entities",
    [(1, 0), (0, 1), (3, 2), (1, 4), (5, 0), (8, 12), (20, 0), (10, 30), (30, 10), (20, 20), (0, 40), (60, 0)],
)
def test_no_label_overlaps_another_or_a_node_and_all_lie_inside_the_drawing(memories, entities):
    graph = graph_layout(subgraph(memories, entities))
    nodes = graph["nodes"]
    assert len(nodes) == memories + entities
    labels = [label_box(n) for n in nodes]
    for i, box in enumerate(labels):
        assert 0 <= box[0] and box[2] <= graph["width"] and 0 <= box[1] and box[3] <= graph["height"], nodes[i]
        for j, other in enumerate(labels[i + 1 :], start=i + 1):
            assert not overlap(box, other), (nodes[i]["short"], nodes[j]["short"])
        for j, node in enumerate(nodes):
            assert j == i or not overlap(box, node_box(node)), (nodes[i]["short"], node["short"])
    for node in nodes:
        left, top, right, bottom = node_box(node)
        assert 0 <= left and right <= graph["width"] and 0 <= top and bottom <= graph["height"]
    for i, a in enumerate(nodes):
        for b in nodes[i + 1 :]:
            assert math.dist((a["x"], a["y"]), (b["x"], b["y"])) >= a["r"] + b["r"]


def test_labels_read_away_from_the_centre_and_keep_their_full_text_for_the_title():
    graph = graph_layout(subgraph(5, 5))
    cx = graph["width"] / 2
    for node in graph["nodes"]:
        if node["anchor"] == "start":
            assert node["label_x"] > node["x"] > cx - 1
        elif node["anchor"] == "end":
            assert node["label_x"] < node["x"] < cx + 1
        assert len(node["short"]) <= 18
        assert node["label"].startswith(node["short"].rstrip("…"))
    memory = next(n for n in graph["nodes"] if n["id"] == "m0")
    assert memory["short"].endswith("…") and len(memory["label"]) > 18


def test_edges_join_their_nodes_where_they_are_drawn():
    graph = graph_layout(subgraph(4, 3))
    at = {n["id"]: (n["x"], n["y"]) for n in graph["nodes"]}
    assert len(graph["edges"]) == 3 + 3
    for edge in graph["edges"]:
        assert (edge["x1"], edge["y1"]) == at[edge["source"]] and (edge["x2"], edge["y2"]) == at[edge["target"]]


def test_a_lone_memory_sits_in_the_middle_of_a_small_drawing():
    graph = graph_layout(subgraph(1, 0))
    (node,) = graph["nodes"]
    assert (node["x"], node["y"]) == (graph["width"] / 2, pytest.approx(graph["height"] / 2, abs=12))
    assert graph["width"] <= 260 and graph["height"] <= 140


def test_a_record_written_elsewhere_draws_what_it_can_and_says_what_it_left_out():
    record = subgraph(70, 0)
    record["nodes"] += [{"id": "m0", "type": "memory", "label": "twice"}, {"type": "memory"}, "junk", {"id": 3}]
    record["edges"] += ["junk", {"source": "m1", "target": "nowhere"}]
    graph = graph_layout(record)
    assert len(graph["nodes"]) == 60 and graph["hidden"] == 10
    assert [n["label"] for n in graph["nodes"] if n["id"] == "m0"] != ["twice"]
    assert graph_layout({"nodes": "junk", "edges": 3}) | {"width": 0, "height": 0} == {
        "nodes": [],
        "edges": [],
        "width": 0,
        "height": 0,
        "hidden": 0,
    }


def test_shorten_cuts_at_a_word_and_marks_the_cut():
    assert shorten("Mira", 18) == "Mira"
    assert shorten("the lantern went out at midnight", 18) == "the lantern went…"
    assert shorten("Supercalifragilisticexpialidocious", 12) == "Supercalifr…"
    assert len(shorten("a " * 40, 7)) <= 7


def test_the_layout_measures_labels_in_the_font_size_the_stylesheet_draws_them_in():
    css = (ROOT / "static/css/app.css").read_text()
    rule = re.search(r"svg\.subgraph \.node text \{[^}]*font-size: (\d+)px", css)
    assert rule and int(rule.group(1)) == FONT_SIZE
