"""Smart Memory (docs/GLOSSARY.md), `chat_metadata.smartMemory`: the summary (with its summaryEnd), session memories
(with their entities and supersession), scene history, story arcs and arc summaries, profiles, the state ledger.
The long-term tier lives in SillyTavern's settings.json (`extension_settings.smart_memory.characters[name]`), not
in the chat: given that object, its memories, canon, persistent arcs, relationship history and epistemic
knowledge are imported for the chat's characters."""

from __future__ import annotations

import re
from typing import Any

from apps.chats.models import Character
from apps.common.exceptions import ApplicationError
from apps.extraction.services.legacy.common import Item, importance_of, index_of, state_item, text_of
from apps.memories.models import Kind

SESSION_TYPES = {"scene", "revelation", "development", "detail"}
LONG_TERM_TYPES = {"fact", "relationship", "preference", "event"}
EPISTEMIC_TYPES = {"knows", "suspects", "believes", "unaware", "hiding"}


def _session_items(state: dict[str, Any]) -> list[Item]:
    """Session memories, with their entities (from the session's registry) and supersession."""
    items: list[Item] = []
    registry = {}
    for entity in state.get("sessionEntities") or state.get("entities") or []:
        if isinstance(entity, dict) and text_of(entity.get("name")):
            registry[str(entity.get("id"))] = {"name": text_of(entity["name"]), "type": text_of(entity.get("type"))}
    for memory in state.get("sessionMemories") or []:
        if (
            not isinstance(memory, dict)
            or memory.get("type") not in SESSION_TYPES
            or not text_of(memory.get("content"))
        ):
            continue
        superseded = memory.get("superseded_by")
        items.append(
            Item(
                f"smart_memory:{memory.get('id')}",
                memory["type"],
                text_of(memory["content"]),
                importance=importance_of(memory.get("importance")),
                entities=[registry[str(e)] for e in memory.get("entities") or [] if str(e) in registry],
                sources=[i for i in memory.get("source_messages") or [] if index_of(i) is not None],
                valid_from=index_of(memory.get("valid_from")),
                valid_to=index_of(memory.get("valid_to")),
                time_scope=text_of(memory.get("time_scope"))
                if memory.get("time_scope") in ("scene", "session", "permanent")
                else "",
                superseded_by=f"smart_memory:{superseded}" if superseded else None,
                contradicts=[f"smart_memory:{other}" for other in memory.get("contradicts") or []],
            )
        )
    return items


def _story_items(state: dict[str, Any]) -> list[Item]:
    """Scene history, story arcs and arc summaries."""
    items: list[Item] = []
    for number, scene in enumerate(state.get("sceneHistory") or []):
        if isinstance(scene, dict) and text_of(scene.get("summary")):
            items.append(
                Item(f"smart_memory:scene:{scene.get('ts', number)}", Kind.SCENE_RECAP, text_of(scene["summary"]))
            )
    for number, arc in enumerate(state.get("storyArcs") or []):
        if isinstance(arc, dict) and text_of(arc.get("content")):
            data = {"status": "resolved" if arc.get("resolved") else "open", "persistent": bool(arc.get("persistent"))}
            items.append(
                Item(f"smart_memory:arc:{arc.get('ts', number)}", Kind.ARC, text_of(arc["content"]), data=data)
            )
    for number, summary in enumerate(state.get("arcSummaries") or []):
        if isinstance(summary, dict) and text_of(summary.get("summary")):
            data = {"status": "resolved", "thread": text_of(summary.get("arc"))}
            items.append(
                Item(
                    f"smart_memory:arc-summary:{summary.get('ts', number)}",
                    Kind.ARC,
                    text_of(summary["summary"]),
                    data=data,
                )
            )
    return items


def _profile_items(state: dict[str, Any]) -> list[Item]:
    """Profiles (by character) and the state ledger."""
    items: list[Item] = []
    profiles = state.get("profiles") if isinstance(state.get("profiles"), dict) else {}
    if any(key in profiles for key in ("character_state", "world_state", "relationship_matrix")):
        profiles = {"": profiles}  # before Smart Memory's chat migration 3: one flat profile
    for owner, sections in profiles.items():
        if not isinstance(sections, dict):
            continue
        for section in ("character_state", "world_state", "relationship_matrix"):
            if text_of(sections.get(section)):
                data = {"section": section, "character": owner}
                items.append(
                    Item(
                        f"smart_memory:profile:{owner}:{section}", Kind.PROFILE, text_of(sections[section]), data=data
                    )
                )
    ledger = state.get("state_ledger") if isinstance(state.get("state_ledger"), dict) else {}
    for entry_key, fields in ledger.items():
        if not isinstance(fields, dict):
            continue
        name, _, kind = str(entry_key).partition("|")
        display = text_of(fields.get("_name")) or name
        item = state_item(
            f"smart_memory:state:{entry_key}",
            display,
            kind or "character",
            {k: v for k, v in fields.items() if not k.startswith("_")},
        )
        if item:
            items.append(item)
    return items


def smart_items(metadata: dict[str, Any]) -> tuple[list[Item], list[dict]]:
    """Items and summary candidates of the chat's Smart Memory state."""
    state = metadata.get("smartMemory")
    if not isinstance(state, dict):
        return [], []
    summaries = []
    if text_of(state.get("summary")):
        summaries.append(
            {
                "key": "smart_memory:summary",
                "text": text_of(state["summary"]),
                "end": index_of(state.get("summaryEnd")),
            }
        )
    return _session_items(state) + _story_items(state) + _profile_items(state), summaries


def _long_term_items(character: Character, tiers: dict[str, Any]) -> list[Item]:
    """A character's long-term memories, canon and persistent arcs."""
    items: list[Item] = []
    base = f"smart_memory:{character.name}"
    for memory in tiers.get("memories") or []:
        if isinstance(memory, dict) and memory.get("type") in LONG_TERM_TYPES and text_of(memory.get("content")):
            superseded = memory.get("superseded_by")
            items.append(
                Item(
                    f"smart_memory:{memory.get('id')}",
                    memory["type"],
                    text_of(memory["content"]),
                    character=character,
                    importance=importance_of(memory.get("importance")),
                    time_scope="permanent",
                    sources=[i for i in memory.get("source_messages") or [] if index_of(i) is not None],
                    superseded_by=f"smart_memory:{superseded}" if superseded else None,
                    contradicts=[f"smart_memory:{other}" for other in memory.get("contradicts") or []],
                )
            )
    canon = tiers.get("canon")
    if isinstance(canon, dict) and text_of(canon.get("text")):
        items.append(Item(f"{base}:canon", Kind.CANON, text_of(canon["text"]), character=character, importance=3))
    for number, arc in enumerate(tiers.get("persistent_arcs") or []):
        if isinstance(arc, dict) and text_of(arc.get("content")):
            data = {"status": "resolved" if arc.get("resolved") else "open", "persistent": True}
            items.append(
                Item(
                    f"{base}:arc:{arc.get('ts', number)}",
                    Kind.ARC,
                    text_of(arc["content"]),
                    character=character,
                    data=data,
                )
            )
    return items


def _relationship_items(character: Character, tiers: dict[str, Any]) -> list[Item]:
    """A character's relationship history (one reading per pair) and epistemic knowledge."""
    items: list[Item] = []
    base = f"smart_memory:{character.name}"
    history = tiers.get("relationship_history") if isinstance(tiers.get("relationship_history"), dict) else {}
    for pair, reading in history.items():
        if not isinstance(reading, dict):
            continue
        subject, target = ([*re.split(r"\s*(?:→|->)\s*", str(pair), maxsplit=1), ""])[:2]
        descriptors = [str(d) for d in reading.get("descriptors") or []]
        magnitude = text_of(reading.get("magnitude"))
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
            or not text_of(entry.get("content"))
        ):
            continue
        holder, target = text_of(entry.get("subject")), text_of(entry.get("target"))
        data = {"holder": holder, "stance": entry["type"], "target": target, "fact": text_of(entry["content"])}
        items.append(
            Item(
                f"smart_memory:{entry.get('id')}",
                Kind.EPISTEMIC,
                text_of(entry["content"]),
                character=character,
                data=data,
                sources=[i for i in entry.get("source_messages") or [] if index_of(i) is not None],
            )
        )
    return items


def smart_settings_items(settings: dict[str, Any], chat_characters: dict[str, Character]) -> tuple[list[Item], int]:
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
        items += _long_term_items(character, tiers) + _relationship_items(character, tiers)
    return items, elsewhere
