"""Importers for what SillyTavern memory extensions (docs/GLOSSARY.md) leave in a chat, mapped onto our memories. The
chat is read, never changed: its metadata and messages keep every key as imported, and importing again adds only what
is new (each memory remembers the item it came from, `data.legacy`).

- ST-BME's legacy graph, `chat_metadata.st_bme_graph` (an object, or the same as a JSON string; newer versions
  keep it only as a migration source): nodes by type — event → event, character and location → the state ledger,
  rule and reflection → fact, thread → arc, pov_memory → what its owner believes (epistemic), synopsis and the
  summary state → the chat's summary; edges: contradicts, and the characters and places an event involves.
  Nodes compressed into a parent (archived, with a parent) are left out: the parent covers them.
- Smart Memory, `chat_metadata.smartMemory`: the summary (with its summaryEnd), session memories (with their
  entities and supersession), scene history, story arcs and arc summaries, profiles, the state ledger. The
  long-term tier lives in SillyTavern's settings.json (`extension_settings.smart_memory.characters[name]`), not
  in the chat: given that object, its memories, canon, persistent arcs, relationship history and epistemic
  knowledge are imported for the chat's characters.
- ST-Auto-Summarize / auto-recap, `message.extra.auto_recap_memory` (older: `auto_summarize_memory`,
  `qvink_memory`): each message's summary, and each scene break's current recap (plain text or one of its JSON
  shapes); `chat_metadata.auto_recap_running_scene_recaps`' current version as the summary.
A chat keeps one rolling summary: a legacy summary is imported only when the chat has none yet.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.db.models import F

from apps.chats.models import Character, Chat, Message
from apps.common.exceptions import ApplicationError
from apps.memories.embeddings import text_hash
from apps.memories.models import Kind, Memory, Status
from apps.memories.services.memories import embed_later, entities_ensure

RECAP_NAMESPACES = ("auto_recap_memory", "auto_summarize_memory", "qvink_memory")
RUNNING_RECAP_KEYS = ("auto_recap_running_scene_recaps", "auto_summarize_running_scene_summaries")
SESSION_TYPES = {"scene", "revelation", "development", "detail"}
LONG_TERM_TYPES = {"fact", "relationship", "preference", "event"}
STANCES = {"certain": "knows", "unsure": "suspects", "mistaken": "believes"}
EPISTEMIC_TYPES = {"knows", "suspects", "believes", "unaware", "hiding"}


@dataclass
class Item:
    """A memory to make: its legacy key (source and the item's own id), and the memory's fields."""

    key: str
    kind: str
    content: str
    importance: int = 2
    character: Character | None = None
    data: dict[str, Any] = field(default_factory=dict)
    entities: list[dict[str, str]] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    valid_from: int | None = None
    valid_to: int | None = None
    status: str = Status.ACTIVE
    time_scope: str = ""
    superseded_by: str | None = None  # another item's key
    contradicts: list[str] = field(default_factory=list)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _importance_of_ten(value: Any) -> int:
    """ST-BME's 0–10 as our 1–3."""
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else 5
    return 1 if number <= 3 else 2 if number <= 6 else 3


def _importance(value: Any) -> int:
    return value if value in (1, 2, 3) else 2


def _state_content(name: str, kind: str, fields: dict[str, str]) -> str:
    listed = "; ".join(f"{key}={value}" for key, value in fields.items() if value)
    return f"{name} ({kind}): {listed or '—'}"


def _state(key: str, name: str, kind: str, fields: dict[str, Any], **extra: Any) -> Item | None:
    name = _text(name)
    fields = {k: _text(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in fields.items()}
    fields = {k: v for k, v in fields.items() if v}
    if not name:
        return None
    data = {"entity": name, "key": name.lower(), "type": kind, "fields": fields}
    return Item(
        key,
        Kind.STATE,
        _state_content(name, kind, fields),
        data=data,
        entities=[{"name": name, "type": kind}],
        **extra,
    )


# --- ST-BME -----------------------------------------------------------------------------------------------------


def _bme_graph(metadata: dict[str, Any]) -> dict[str, Any] | None:
    graph = metadata.get("st_bme_graph")
    if isinstance(graph, str) and graph.strip():
        try:
            graph = json.loads(graph)
        except ValueError:
            return None
    if not isinstance(graph, dict) or graph.get("version") is None or not isinstance(graph.get("nodes"), list):
        return None
    return graph


def _bme_items(metadata: dict[str, Any]) -> tuple[list[Item], list[dict[str, Any]], int]:
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
        seq = _index(node.get("seq"))
        span = node.get("seqRange") if isinstance(node.get("seqRange"), list) else [seq, seq]
        sources = sorted({i for i in span if _index(i) is not None})
        common = {"sources": sources, "valid_from": seq, "importance": _importance_of_ten(node.get("importance"))}
        title, summary = _text(fields.get("title")), _text(fields.get("summary"))
        if kind == "event":
            participants = [p.strip() for p in _text(fields.get("participants")).split(",") if p.strip()]
            content = f"{title}: {summary}" if title and summary else title or summary
            if content:
                entities = [{"name": name, "type": "character"} for name in participants]
                items.append(
                    Item(
                        key,
                        Kind.EVENT,
                        content,
                        entities=entities,
                        data={"status": fields.get("status", "")},
                        **common,
                    )
                )
        elif kind in ("character", "location"):
            name = _text(fields.get("name"))
            entity_type = "character" if kind == "character" else "place"
            if name:
                names[node_id] = (name, entity_type)
            rest = {k: v for k, v in fields.items() if k != "name"}
            state = _state(key, name, entity_type, rest, sources=sources, valid_from=seq)
            if state:
                items.append(state)
        elif kind == "rule":
            content = ": ".join(part for part in (title, _text(fields.get("constraint"))) if part)
            if content:
                items.append(Item(key, Kind.FACT, content, time_scope="permanent", **common))
        elif kind == "thread":
            status = _text(fields.get("status"))
            content = ": ".join(part for part in (title, summary) if part)
            if content:
                resolved = status in ("completed", "abandoned", "resolved")
                items.append(
                    Item(key, Kind.ARC, content, data={"status": "resolved" if resolved else "open"}, **common)
                )
        elif kind == "reflection":
            content = " ".join(
                part for part in (_text(fields.get("insight")), _text(fields.get("suggestion"))) if part
            )
            if content:
                items.append(Item(key, Kind.FACT, content, **{**common, "importance": 1}))
        elif kind == "pov_memory":
            scope = node.get("scope") if isinstance(node.get("scope"), dict) else {}
            holder = _text(scope.get("ownerName"))
            belief = summary or _text(fields.get("belief"))
            if belief:
                stance = STANCES.get(_text(fields.get("certainty")), "believes")
                data = {"holder": holder, "stance": stance, "target": _text(fields.get("about")), "fact": belief}
                entities = [{"name": holder, "type": "character"}] if holder else []
                items.append(Item(key, Kind.EPISTEMIC, belief, data=data, entities=entities, **common))
        elif kind == "synopsis":
            if summary:
                summaries.append({"key": key, "text": summary, "end": (max(sources) + 1) if sources else None})
        else:
            content = "; ".join(f"{k}: {_text(v)}" for k, v in fields.items() if _text(v))
            if content:
                items.append(Item(key, Kind.FACT, f"[{kind}] {content}", **common))
    state = graph.get("summaryState") if isinstance(graph.get("summaryState"), dict) else {}
    for entry in state.get("entries") or []:
        if isinstance(entry, dict) and entry.get("status", "active") == "active" and _text(entry.get("text")):
            span = entry.get("messageRange") if isinstance(entry.get("messageRange"), list) else []
            end = max((i for i in span if _index(i) is not None), default=None)
            summaries.insert(
                0,
                {
                    "key": f"st_bme:{entry.get('id')}",
                    "text": _text(entry["text"]),
                    "end": end + 1 if end is not None else None,
                },
            )
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
    return items, summaries, left_out


# --- Smart Memory -----------------------------------------------------------------------------------------------


def _smart_items(metadata: dict[str, Any]) -> tuple[list[Item], list[dict]]:
    state = metadata.get("smartMemory")
    if not isinstance(state, dict):
        return [], []
    items: list[Item] = []
    summaries = []
    if _text(state.get("summary")):
        summaries.append(
            {"key": "smart_memory:summary", "text": _text(state["summary"]), "end": _index(state.get("summaryEnd"))}
        )
    registry = {}
    for entity in state.get("sessionEntities") or state.get("entities") or []:
        if isinstance(entity, dict) and _text(entity.get("name")):
            registry[str(entity.get("id"))] = {"name": _text(entity["name"]), "type": _text(entity.get("type"))}
    for memory in state.get("sessionMemories") or []:
        if not isinstance(memory, dict) or memory.get("type") not in SESSION_TYPES or not _text(memory.get("content")):
            continue
        superseded = memory.get("superseded_by")
        items.append(
            Item(
                f"smart_memory:{memory.get('id')}",
                memory["type"],
                _text(memory["content"]),
                importance=_importance(memory.get("importance")),
                entities=[registry[str(e)] for e in memory.get("entities") or [] if str(e) in registry],
                sources=[i for i in memory.get("source_messages") or [] if _index(i) is not None],
                valid_from=_index(memory.get("valid_from")),
                valid_to=_index(memory.get("valid_to")),
                time_scope=_text(memory.get("time_scope"))
                if memory.get("time_scope") in ("scene", "session", "permanent")
                else "",
                superseded_by=f"smart_memory:{superseded}" if superseded else None,
                contradicts=[f"smart_memory:{other}" for other in memory.get("contradicts") or []],
            )
        )
    for number, scene in enumerate(state.get("sceneHistory") or []):
        if isinstance(scene, dict) and _text(scene.get("summary")):
            items.append(
                Item(f"smart_memory:scene:{scene.get('ts', number)}", Kind.SCENE_RECAP, _text(scene["summary"]))
            )
    for number, arc in enumerate(state.get("storyArcs") or []):
        if isinstance(arc, dict) and _text(arc.get("content")):
            data = {"status": "resolved" if arc.get("resolved") else "open", "persistent": bool(arc.get("persistent"))}
            items.append(Item(f"smart_memory:arc:{arc.get('ts', number)}", Kind.ARC, _text(arc["content"]), data=data))
    for number, summary in enumerate(state.get("arcSummaries") or []):
        if isinstance(summary, dict) and _text(summary.get("summary")):
            data = {"status": "resolved", "thread": _text(summary.get("arc"))}
            items.append(
                Item(
                    f"smart_memory:arc-summary:{summary.get('ts', number)}",
                    Kind.ARC,
                    _text(summary["summary"]),
                    data=data,
                )
            )
    profiles = state.get("profiles") if isinstance(state.get("profiles"), dict) else {}
    if any(key in profiles for key in ("character_state", "world_state", "relationship_matrix")):
        profiles = {"": profiles}  # before Smart Memory's chat migration 3: one flat profile
    for owner, sections in profiles.items():
        if not isinstance(sections, dict):
            continue
        for section in ("character_state", "world_state", "relationship_matrix"):
            if _text(sections.get(section)):
                data = {"section": section, "character": owner}
                items.append(
                    Item(f"smart_memory:profile:{owner}:{section}", Kind.PROFILE, _text(sections[section]), data=data)
                )
    ledger = state.get("state_ledger") if isinstance(state.get("state_ledger"), dict) else {}
    for entry_key, fields in ledger.items():
        if not isinstance(fields, dict):
            continue
        name, _, kind = str(entry_key).partition("|")
        display = _text(fields.get("_name")) or name
        item = _state(
            f"smart_memory:state:{entry_key}",
            display,
            kind or "character",
            {k: v for k, v in fields.items() if not k.startswith("_")},
        )
        if item:
            items.append(item)
    return items, summaries


def _smart_settings_items(settings: dict[str, Any], chat_characters: dict[str, Character]) -> tuple[list[Item], int]:
    """The long-term tier of Smart Memory's settings.json, for the chat's characters (by name). Returns the items
    and how many characters of the settings are not in this chat."""
    container = settings.get("smart_memory", settings) if isinstance(settings, dict) else {}
    characters = container.get("characters") if isinstance(container, dict) else None
    if not isinstance(characters, dict):
        raise ApplicationError(
            "Smart Memory's settings are extension_settings.smart_memory (an object with characters).",
            {"field": "smart_memory_settings"},
        )
    items: list[Item] = []
    elsewhere = 0
    for name, tiers in characters.items():
        character = chat_characters.get(str(name).strip().lower())
        if character is None or not isinstance(tiers, dict):
            elsewhere += 1
            continue
        base = f"smart_memory:{character.name}"
        for memory in tiers.get("memories") or []:
            if isinstance(memory, dict) and memory.get("type") in LONG_TERM_TYPES and _text(memory.get("content")):
                superseded = memory.get("superseded_by")
                items.append(
                    Item(
                        f"smart_memory:{memory.get('id')}",
                        memory["type"],
                        _text(memory["content"]),
                        character=character,
                        importance=_importance(memory.get("importance")),
                        time_scope="permanent",
                        sources=[i for i in memory.get("source_messages") or [] if _index(i) is not None],
                        superseded_by=f"smart_memory:{superseded}" if superseded else None,
                        contradicts=[f"smart_memory:{other}" for other in memory.get("contradicts") or []],
                    )
                )
        canon = tiers.get("canon")
        if isinstance(canon, dict) and _text(canon.get("text")):
            items.append(Item(f"{base}:canon", Kind.CANON, _text(canon["text"]), character=character, importance=3))
        for number, arc in enumerate(tiers.get("persistent_arcs") or []):
            if isinstance(arc, dict) and _text(arc.get("content")):
                data = {"status": "resolved" if arc.get("resolved") else "open", "persistent": True}
                items.append(
                    Item(
                        f"{base}:arc:{arc.get('ts', number)}",
                        Kind.ARC,
                        _text(arc["content"]),
                        character=character,
                        data=data,
                    )
                )
        history = tiers.get("relationship_history") if isinstance(tiers.get("relationship_history"), dict) else {}
        for pair, reading in history.items():
            if not isinstance(reading, dict):
                continue
            subject, target = ([*re.split(r"\s*(?:→|->)\s*", str(pair), maxsplit=1), ""])[:2]
            descriptors = [str(d) for d in reading.get("descriptors") or []]
            magnitude = _text(reading.get("magnitude"))
            content = f"{subject} -> {target}: {', '.join(descriptors)}" + (f" ({magnitude})" if magnitude else "")
            data = {
                "history": True,
                "subject": subject,
                "target": target,
                "descriptors": descriptors,
                "magnitude": magnitude,
            }
            items.append(
                Item(
                    f"{base}:rel:{pair}",
                    Kind.RELATIONSHIP,
                    content,
                    character=character,
                    data=data,
                    entities=[{"name": n, "type": "character"} for n in (subject, target) if n],
                )
            )
        for entry in tiers.get("epistemic_knowledge") or []:
            if (
                not isinstance(entry, dict)
                or entry.get("type") not in EPISTEMIC_TYPES
                or not _text(entry.get("content"))
            ):
                continue
            holder, target = _text(entry.get("subject")), _text(entry.get("target"))
            data = {"holder": holder, "stance": entry["type"], "target": target, "fact": _text(entry["content"])}
            items.append(
                Item(
                    f"smart_memory:{entry.get('id')}",
                    Kind.EPISTEMIC,
                    _text(entry["content"]),
                    character=character,
                    data=data,
                    sources=[i for i in entry.get("source_messages") or [] if _index(i) is not None],
                )
            )
    return items, elsewhere


# --- auto-recap ------------------------------------------------------------------------------------------------


def recap_text(raw: Any) -> tuple[str, str]:
    """(name, text) of a scene recap as ST-Auto-Summarize stores it: plain text, or one of its JSON shapes
    (stage 1 to 3, a multi-stage wrapper, the entity-based and legacy ones), maybe in a ```json fence."""
    if isinstance(raw, dict):
        value: Any = raw.get("content", raw)
    else:
        value = _text(raw)
        fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", value, re.S)
        if fenced:
            value = fenced.group(1)
        if value.startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                pass
    if not isinstance(value, dict):
        return "", _text(value)
    for stage in ("stage3", "stage2", "stage1"):
        if isinstance(value.get(stage), dict):
            name = _text(value.get("scene_name")) or _text((value.get("stage1") or {}).get("sn"))
            inner_name, text = recap_text(value[stage])
            return name or inner_name, text
    name = _text(value.get("sn")) or _text(value.get("scene_name"))
    parts: list[str] = []
    for key in ("developments", "open", "state", "resolved"):
        entries = [str(e) for e in value.get(key) or [] if str(e).strip()]
        if entries:
            parts.append(f"{key.upper()}: " + "; ".join(entries))
    recap = value.get("recap")
    if isinstance(recap, dict):
        parts += [
            f"{k.upper()}: {_text(v) if isinstance(v, str) else '; '.join(map(str, v or []))}"
            for k, v in recap.items()
            if v
        ]
    for key in ("plot", "recap", "rc", "summary"):
        if _text(value.get(key)):
            parts.insert(0, _text(value[key]))
    if not parts and value.get("extracted"):
        parts = [str(e) for e in value["extracted"] if str(e).strip()]
    return name, "\n".join(parts)


def _recap_items(chat: Chat) -> tuple[list[Item], list[dict]]:
    items: list[Item] = []
    rows = (
        Message.objects.filter(chat=chat)
        .filter(extra__has_any_keys=list(RECAP_NAMESPACES))
        .order_by("index")
        .values_list("index", "extra")
    )
    for index, extra in rows:
        for namespace in RECAP_NAMESPACES:
            block = extra.get(namespace)
            if not isinstance(block, dict) or block.get("is_auto_recap_system_memory"):
                continue
            text = _text(block.get("memory"))
            if text and not block.get("exclude"):
                items.append(
                    Item(
                        f"{namespace}:{index}:memory",
                        Kind.EVENT,
                        text,
                        importance=1,
                        sources=[index],
                        valid_from=index,
                    )
                )
            for prefix in ("scene_recap", "scene_summary"):
                versions = block.get(f"{prefix}_versions")
                current = block.get(f"{prefix}_current_index")
                raw = None
                if isinstance(versions, list) and _index(current) is not None and current < len(versions):
                    raw = versions[current]
                raw = raw or block.get(f"{prefix}_memory") or block.get(f"scene_break_{prefix.split('_')[1]}")
                name, recap = recap_text(raw) if raw else ("", "")
                if recap:
                    title = _text(block.get("scene_break_name")) or name
                    data = {"title": title, "end": index + 1}
                    items.append(
                        Item(
                            f"{namespace}:{index}:scene",
                            Kind.SCENE_RECAP,
                            recap,
                            data=data,
                            sources=[index],
                            valid_from=index,
                        )
                    )
                    break
    summaries = []
    for key in RUNNING_RECAP_KEYS:
        running = chat.chat_metadata.get(key)
        if not isinstance(running, dict):
            continue
        current = next(
            (
                v
                for v in running.get("versions") or []
                if isinstance(v, dict) and v.get("version") == running.get("current_version")
            ),
            None,
        )
        if current is not None:
            _, text = recap_text(current.get("content"))
            if text:
                end = _index(current.get("new_scene_index"))
                summaries.append(
                    {
                        "key": f"{key}:{current.get('version')}",
                        "text": text,
                        "end": end + 1 if end is not None else None,
                    }
                )
    return items, summaries


# --- import ----------------------------------------------------------------------------------------------------


def legacy_found(*, chat: Chat) -> dict[str, int]:
    """What the chat carries that is not imported yet, by source (items that would become memories)."""
    metadata = chat.chat_metadata if isinstance(chat.chat_metadata, dict) else {}
    bme, bme_summaries, _ = _bme_items(metadata)
    smart, smart_summaries = _smart_items(metadata)
    recap, recap_summaries = _recap_items(chat)
    keys = [i.key for i in bme + smart + recap]
    summaries = smart_summaries + recap_summaries + bme_summaries
    if summaries:
        keys.append(summaries[0]["key"])  # one summary at most
    done = set(
        Memory.objects.filter(user_id=chat.user_id, origin="import", data__legacy__key__in=keys).values_list(
            "data__legacy__key", flat=True
        )
    )
    found: dict[str, int] = {}
    for key in keys:
        if key not in done:
            found[_source(key)] = found.get(_source(key), 0) + 1
    return found


def _source(key: str) -> str:
    head = key.split(":", 1)[0]
    return "auto_recap" if head in RECAP_NAMESPACES or head in RUNNING_RECAP_KEYS else head


@transaction.atomic
def chat_legacy_import(
    *, user: AbstractUser, chat: Chat, smart_memory_settings: dict[str, Any] | None = None
) -> dict[str, dict[str, int]]:
    """Import the chat's legacy extension data as memories (see the module's docstring). Returns, by source,
    how many were imported, already there, or left out."""
    if chat.user_id != user.pk:
        raise ApplicationError("Unknown chat.", {"field": "chat"}, status=404)
    chat = Chat.objects.select_for_update().get(pk=chat.pk)
    metadata = chat.chat_metadata if isinstance(chat.chat_metadata, dict) else {}
    characters = {c.name.strip().lower(): c for c in chat.characters.all()}
    bme, bme_summaries, compressed = _bme_items(metadata)
    smart, smart_summaries = _smart_items(metadata)
    recap, recap_summaries = _recap_items(chat)
    items = bme + smart + recap
    counts: dict[str, dict[str, int]] = {}

    def count(source: str, what: str, n: int = 1) -> None:
        if n:
            counts.setdefault(source, {}).setdefault(what, 0)
            counts[source][what] += n

    if compressed:
        count("st_bme", "left out (compressed into a parent)", compressed)
    if smart_memory_settings is not None:
        long_term, elsewhere = _smart_settings_items(smart_memory_settings, characters)
        items += long_term
        count("smart_memory", "characters not in this chat", elsewhere)
    summaries = smart_summaries + recap_summaries + bme_summaries
    has_summary = Memory.objects.filter(chat=chat, kind=Kind.SUMMARY, status=Status.ACTIVE).exists()
    imported_keys = set(
        Memory.objects.filter(
            user=user, origin="import", data__legacy__key__in=[i.key for i in items] + [s["key"] for s in summaries]
        ).values_list("data__legacy__key", flat=True)
    )
    made: dict[str, Memory | None] = {}
    for item in items:
        source = _source(item.key)
        if item.key in imported_keys:
            count(source, "already imported")
            continue
        memory = Memory.objects.create(
            user=user,
            character=item.character,
            chat=None if item.character else chat,
            kind=item.kind,
            content=item.content,
            content_hash=text_hash(item.content),
            importance=item.importance,
            data={**item.data, "legacy": {"source": source, "key": item.key}},
            source_chat=chat,
            source_message_indices=sorted(set(item.sources)),
            valid_from=item.valid_from,
            valid_to=item.valid_to,
            time_scope=item.time_scope,
            origin="import",
        )
        if item.entities:
            memory.entities.set(entities_ensure(user=user, character=item.character, entities=item.entities))
        made[item.key] = memory
        count(source, "imported")
    for item in items:
        memory = made.get(item.key)
        if memory is None:
            continue
        later = made.get(item.superseded_by or "")
        if later is not None:
            Memory.objects.filter(pk=memory.pk).update(
                superseded_by=later, status=Status.RETIRED, retired_reason="superseded", version=F("version") + 1
            )
        for other in item.contradicts:
            if other in made:
                memory.contradicts.add(made[other])
    for summary in summaries:
        source = _source(summary["key"])
        if summary["key"] in imported_keys:
            count(source, "already imported")
        elif has_summary:
            count(source, "summary left out (the chat has one)")
        else:
            data = {"legacy": {"source": source, "key": summary["key"]}}
            if summary.get("end") is not None:
                data["summary_end"] = min(summary["end"], chat.message_count)
                _pipeline_covered(chat, data["summary_end"])
            Memory.objects.create(
                user=user,
                chat=chat,
                kind=Kind.SUMMARY,
                content=summary["text"],
                content_hash=text_hash(summary["text"]),
                data=data,
                source_chat=chat,
                origin="import",
                importance=3,
            )
            has_summary = True
            made[summary["key"]] = None
            count(source, "imported")
    if made:
        embed_later(user_id=user.pk)
    return counts


def _pipeline_covered(chat: Chat, end: int) -> None:
    """An imported summary covers the chat up to `end`: the extraction pipeline's compaction continues from there
    instead of summarising those messages again."""
    from apps.extraction.models import ChatPipeline

    pipeline, _ = ChatPipeline.objects.select_for_update().get_or_create(chat=chat, defaults={"user_id": chat.user_id})
    through = dict(pipeline.through or {})
    if int(through.get("compaction", 0)) < end:
        through["compaction"] = end
        pipeline.through = through
        pipeline.save(update_fields=["through"])
