"""What the legacy importers share: the item each of them reads out of a chat (apps/extraction/services/legacy/bme.py,
smart.py, recap.py), the helpers that read the extensions' loose values, and how items become memories: created
once (each remembers its item, `data.legacy`), linked (supersession, contradictions), the summary imported only
when the chat has none, counted by source, and embedded later."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db.models import F

from apps.chats.models import Character, Chat
from apps.common.serializers import INT_MAX
from apps.extraction.models import ChatPipeline
from apps.memories.embeddings import text_hash
from apps.memories.models import Kind, Memory, Retired, Status
from apps.memories.services.memories import embed_later, entities_ensure

# Where auto-recap keeps its data: a message's extra, and the chat's running recap (counted as "auto_recap").
RECAP_NAMESPACES = ("auto_recap_memory", "auto_summarize_memory", "qvink_memory")
RUNNING_RECAP_KEYS = ("auto_recap_running_scene_recaps", "auto_summarize_running_scene_summaries")

Counts = dict[str, dict[str, int]]  # source → what happened → how many


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


def text_of(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def index_of(value: Any) -> int | None:
    """A message's index as the legacy data wrote it, or None: a whole number a PostgreSQL integer holds."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT_MAX else None


def importance_of(value: Any) -> int:
    return value if value in (1, 2, 3) else 2


def _state_content(name: str, kind: str, fields: dict[str, str]) -> str:
    listed = "; ".join(f"{key}={value}" for key, value in fields.items() if value)
    return f"{name} ({kind}): {listed or '—'}"


def state_item(key: str, name: str, kind: str, fields: dict[str, Any], **extra: Any) -> Item | None:
    """An entry of the state ledger: an entity's name, type and fields."""
    name = text_of(name)
    fields = {k: text_of(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in fields.items()}
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


def source_of(key: str) -> str:
    head = key.split(":", 1)[0]
    return "auto_recap" if head in RECAP_NAMESPACES or head in RUNNING_RECAP_KEYS else head


def count(counts: Counts, source: str, what: str, n: int = 1) -> None:
    if n:
        counts.setdefault(source, {}).setdefault(what, 0)
        counts[source][what] += n


def _items_store(
    *, user: AbstractUser, chat: Chat, items: list[Item], imported_keys: set[str], counts: Counts
) -> dict[str, Memory | None]:
    """A memory for each item not imported before (by its key), then their supersession and contradictions."""
    made: dict[str, Memory | None] = {}
    for item in items:
        source = source_of(item.key)
        if item.key in imported_keys:
            count(counts, source, "already imported")
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
        count(counts, source, "imported")
    for item in items:
        memory = made.get(item.key)
        if memory is None:
            continue
        later = made.get(item.superseded_by or "")
        if later is not None:
            Memory.objects.filter(pk=memory.pk).update(
                superseded_by=later, status=Status.RETIRED, retired_reason=Retired.SUPERSEDED, version=F("version") + 1
            )
        for other in item.contradicts:
            if other in made:
                memory.contradicts.add(made[other])
    return made


def _summaries_store(
    *,
    user: AbstractUser,
    chat: Chat,
    summaries: list[dict[str, Any]],
    imported_keys: set[str],
    has_summary: bool,
    counts: Counts,
) -> list[str]:
    """The first summary not imported before, when the chat has none yet (a chat keeps one rolling summary).
    Returns the keys of what was imported."""
    made = []
    for summary in summaries:
        source = source_of(summary["key"])
        if summary["key"] in imported_keys:
            count(counts, source, "already imported")
        elif has_summary:
            count(counts, source, "summary left out (the chat has one)")
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
            made.append(summary["key"])
            count(counts, source, "imported")
    return made


def memories_make(
    *, user: AbstractUser, chat: Chat, items: list[Item], summaries: list[dict[str, Any]], counts: Counts
) -> None:
    """The items and summaries as memories, each at most once (an item already imported is counted, not made
    again); embedded later when any was made."""
    has_summary = Memory.objects.filter(chat=chat, kind=Kind.SUMMARY, status=Status.ACTIVE).exists()
    imported_keys = set(
        Memory.objects.filter(
            user=user, origin="import", data__legacy__key__in=[i.key for i in items] + [s["key"] for s in summaries]
        ).values_list("data__legacy__key", flat=True)
    )
    made = _items_store(user=user, chat=chat, items=items, imported_keys=imported_keys, counts=counts)
    made_summaries = _summaries_store(
        user=user, chat=chat, summaries=summaries, imported_keys=imported_keys, has_summary=has_summary, counts=counts
    )
    if made or made_summaries:
        embed_later(user_id=user.pk)


def _pipeline_covered(chat: Chat, end: int) -> None:
    """An imported summary covers the chat up to `end`: the extraction pipeline's compaction continues from there
    instead of summarising those messages again."""
    pipeline, _ = ChatPipeline.objects.select_for_update().get_or_create(chat=chat, defaults={"user_id": chat.user_id})
    through = dict(pipeline.through or {})
    if int(through.get("compaction", 0)) < end:
        through["compaction"] = end
        pipeline.through = through
        pipeline.save(update_fields=["through"])
