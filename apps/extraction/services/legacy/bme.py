"""ST-BME's legacy graph (docs/GLOSSARY.md), `chat_metadata.st_bme_graph`: an object, or the same as a JSON string;
newer versions keep it only as a migration source. Nodes by type — event → event, character and location → the
state ledger, rule and reflection → fact, thread → arc, pov_memory → what its owner believes (epistemic), synopsis
and the summary state → the chat's summary; edges: contradicts, and the characters and places an event involves.
Nodes compressed into a parent (archived, with a parent) are left out: the parent covers them."""

from __future__ import annotations

from typing import Any

from apps.common.jsonsafe import loads_strict
from apps.extraction.services.legacy.common import Item, index_of, state_item, text_of
from apps.memories.models import Kind

STANCES = {"certain": "knows", "unsure": "suspects", "mistaken": "believes"}


def _bme_graph(metadata: dict[str, Any]) -> dict[str, Any] | None:
    graph = metadata.get("st_bme_graph")
    if isinstance(graph, str) and graph.strip():
        try:
            graph = loads_strict(graph)  # NaN and 1e400 are not a graph's, and could not be stored from it
        except (ValueError, RecursionError):  # not JSON, or nested past what the parser follows
            return None
    if not isinstance(graph, dict) or graph.get("version") is None or not isinstance(graph.get("nodes"), list):
        return None
    return graph


def _importance_of_ten(value: Any) -> int:
    """ST-BME's 0–10 as our 1–3."""
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else 5
    return 1 if number <= 3 else 2 if number <= 6 else 3


def _node_item(node: dict[str, Any], key: str, common: dict[str, Any]) -> Item | None:
    """The memory a node of the kinds that are not entities or summaries becomes, if it says anything."""
    kind, fields = node.get("type"), node["fields"]
    title, summary = text_of(fields.get("title")), text_of(fields.get("summary"))
    if kind == "event":
        participants = [p.strip() for p in text_of(fields.get("participants")).split(",") if p.strip()]
        content = f"{title}: {summary}" if title and summary else title or summary
        if content:
            entities = [{"name": name, "type": "character"} for name in participants]
            return Item(
                key, Kind.EVENT, content, entities=entities, data={"status": fields.get("status", "")}, **common
            )
    elif kind == "rule":
        content = ": ".join(part for part in (title, text_of(fields.get("constraint"))) if part)
        if content:
            return Item(key, Kind.FACT, content, time_scope="permanent", **common)
    elif kind == "thread":
        status = text_of(fields.get("status"))
        content = ": ".join(part for part in (title, summary) if part)
        if content:
            resolved = status in ("completed", "abandoned", "resolved")
            return Item(key, Kind.ARC, content, data={"status": "resolved" if resolved else "open"}, **common)
    elif kind == "reflection":
        content = " ".join(
            part for part in (text_of(fields.get("insight")), text_of(fields.get("suggestion"))) if part
        )
        if content:
            return Item(key, Kind.FACT, content, **{**common, "importance": 1})
    elif kind == "pov_memory":
        scope = node.get("scope") if isinstance(node.get("scope"), dict) else {}
        holder = text_of(scope.get("ownerName"))
        belief = summary or text_of(fields.get("belief"))
        if belief:
            stance = STANCES.get(text_of(fields.get("certainty")), "believes")
            data = {"holder": holder, "stance": stance, "target": text_of(fields.get("about")), "fact": belief}
            entities = [{"name": holder, "type": "character"}] if holder else []
            return Item(key, Kind.EPISTEMIC, belief, data=data, entities=entities, **common)
    else:
        content = "; ".join(f"{k}: {text_of(v)}" for k, v in fields.items() if text_of(v))
        if content:
            return Item(key, Kind.FACT, f"[{kind}] {content}", **common)
    return None


def _summary_state(graph: dict[str, Any], summaries: list[dict[str, Any]]) -> None:
    """The summary state's active entries, put before the synopses (each in turn at the front)."""
    state = graph.get("summaryState") if isinstance(graph.get("summaryState"), dict) else {}
    for entry in state.get("entries") or []:
        if isinstance(entry, dict) and entry.get("status", "active") == "active" and text_of(entry.get("text")):
            span = entry.get("messageRange") if isinstance(entry.get("messageRange"), list) else []
            end = max((i for i in span if index_of(i) is not None), default=None)
            summaries.insert(
                0,
                {
                    "key": f"st_bme:{entry.get('id')}",
                    "text": text_of(entry["text"]),
                    "end": end + 1 if end is not None else None,
                },
            )


def _edges(graph: dict[str, Any], items: list[Item], names: dict[str, tuple[str, str]]) -> None:
    """Contradictions between items, and the characters and places an item is linked to, as its entities."""
    by_key = {item.key: item for item in items}
    for edge in graph.get("edges") or []:
        if not isinstance(edge, dict) or edge.get("invalidAt") or edge.get("expiredAt"):
            continue
        a, b = str(edge.get("fromId", "")), str(edge.get("toId", ""))
        first, second = by_key.get(f"st_bme:{a}"), by_key.get(f"st_bme:{b}")
        if edge.get("relation") == "contradicts" and first and second:
            first.contradicts.append(second.key)
        for memory, other in ((first, b), (second, a)):
            if memory is not None and other in names and memory.kind != Kind.STATE:
                name, entity_type = names[other]
                if all(e["name"].lower() != name.lower() for e in memory.entities):
                    memory.entities.append({"name": name, "type": entity_type})


def bme_items(metadata: dict[str, Any]) -> tuple[list[Item], list[dict[str, Any]], int]:
    """Items, summary candidates and how many nodes were left out (compressed into a parent)."""
    graph = _bme_graph(metadata)
    if graph is None:
        return [], [], 0
    items: list[Item] = []
    summaries: list[dict[str, Any]] = []
    names: dict[str, tuple[str, str]] = {}  # node id → (name, entity type) of characters and places
    left_out = 0
    for node in graph["nodes"]:
        if not isinstance(node, dict) or not isinstance(node.get("fields"), dict):
            continue
        if node.get("archived") and node.get("parentId"):
            left_out += 1
            continue
        kind, fields, node_id = node.get("type"), node["fields"], str(node.get("id", ""))
        key = f"st_bme:{node_id}"
        seq = index_of(node.get("seq"))
        span = node.get("seqRange") if isinstance(node.get("seqRange"), list) else [seq, seq]
        sources = sorted({i for i in span if index_of(i) is not None})
        if kind in ("character", "location"):
            name = text_of(fields.get("name"))
            entity_type = "character" if kind == "character" else "place"
            if name:
                names[node_id] = (name, entity_type)
            rest = {k: v for k, v in fields.items() if k != "name"}
            item = state_item(key, name, entity_type, rest, sources=sources, valid_from=seq)
        elif kind == "synopsis":
            summary = text_of(fields.get("summary"))
            if summary:
                summaries.append({"key": key, "text": summary, "end": (max(sources) + 1) if sources else None})
            continue
        else:
            common = {"sources": sources, "valid_from": seq, "importance": _importance_of_ten(node.get("importance"))}
            item = _node_item(node, key, common)
        if item:
            items.append(item)
    _summary_state(graph, summaries)
    _edges(graph, items, names)
    return items, summaries, left_out
