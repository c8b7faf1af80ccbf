"""ST-Auto-Summarize / auto-recap (docs/GLOSSARY.md), `message.extra.auto_recap_memory` (older:
`auto_summarize_memory`, `qvink_memory`): each message's summary, and each scene break's current recap (plain text
or one of its JSON shapes); `chat_metadata.auto_recap_running_scene_recaps`' current version as the summary."""

from __future__ import annotations

import re
from typing import Any

from apps.chats.models import Chat, Message
from apps.common.jsonsafe import loads_strict
from apps.extraction.services.legacy.common import RECAP_NAMESPACES, RUNNING_RECAP_KEYS, Item, index_of, text_of
from apps.memories.models import Kind


def recap_text(raw: Any) -> tuple[str, str]:
    """(name, text) of a scene recap as ST-Auto-Summarize stores it: plain text, or one of its JSON shapes
    (stage 1 to 3, a multi-stage wrapper, the entity-based and legacy ones), maybe in a ```json fence."""
    if isinstance(raw, dict):
        value: Any = raw.get("content", raw)
    else:
        value = text_of(raw)
        fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", value, re.S)
        if fenced:
            value = fenced.group(1)
        if value.startswith("{"):
            try:
                value = loads_strict(value)
            except (ValueError, RecursionError):  # plain text after all
                pass
    if not isinstance(value, dict):
        return "", text_of(value)
    for stage in ("stage3", "stage2", "stage1"):
        if isinstance(value.get(stage), dict):
            name = text_of(value.get("scene_name")) or text_of((value.get("stage1") or {}).get("sn"))
            inner_name, text = recap_text(value[stage])
            return name or inner_name, text
    name = text_of(value.get("sn")) or text_of(value.get("scene_name"))
    parts: list[str] = []
    for key in ("developments", "open", "state", "resolved"):
        entries = [str(e) for e in value.get(key) or [] if str(e).strip()]
        if entries:
            parts.append(f"{key.upper()}: " + "; ".join(entries))
    recap = value.get("recap")
    if isinstance(recap, dict):
        parts += [
            f"{k.upper()}: {text_of(v) if isinstance(v, str) else '; '.join(map(str, v or []))}"
            for k, v in recap.items()
            if v
        ]
    for key in ("plot", "recap", "rc", "summary"):
        if text_of(value.get(key)):
            parts.insert(0, text_of(value[key]))
    if not parts and value.get("extracted"):
        parts = [str(e) for e in value["extracted"] if str(e).strip()]
    return name, "\n".join(parts)


def _block_items(namespace: str, index: int, block: dict[str, Any]) -> list[Item]:
    """A message's summary, and the scene recap of a scene break at that message (its current version)."""
    items: list[Item] = []
    text = text_of(block.get("memory"))
    if text and not block.get("exclude"):
        items.append(
            Item(f"{namespace}:{index}:memory", Kind.EVENT, text, importance=1, sources=[index], valid_from=index)
        )
    for prefix in ("scene_recap", "scene_summary"):
        versions = block.get(f"{prefix}_versions")
        current = block.get(f"{prefix}_current_index")
        raw = None
        if isinstance(versions, list) and index_of(current) is not None and current < len(versions):
            raw = versions[current]
        raw = raw or block.get(f"{prefix}_memory") or block.get(f"scene_break_{prefix.split('_')[1]}")
        name, recap = recap_text(raw) if raw else ("", "")
        if recap:
            title = text_of(block.get("scene_break_name")) or name
            data = {"title": title, "end": index + 1}
            items.append(
                Item(
                    f"{namespace}:{index}:scene", Kind.SCENE_RECAP, recap, data=data, sources=[index], valid_from=index
                )
            )
            break
    return items


def _running_summaries(chat: Chat) -> list[dict]:
    """The current version of the chat's running recap, as a summary candidate."""
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
                end = index_of(current.get("new_scene_index"))
                summaries.append(
                    {
                        "key": f"{key}:{current.get('version')}",
                        "text": text,
                        "end": end + 1 if end is not None else None,
                    }
                )
    return summaries


def recap_items(chat: Chat) -> tuple[list[Item], list[dict]]:
    """Items and summary candidates of auto-recap's data in the chat's messages and metadata."""
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
            items += _block_items(namespace, index, block)
    return items, _running_summaries(chat)
