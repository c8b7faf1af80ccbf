"""Applying a push's memory changes: last write wins between concurrent versions, except daily memories, whose
bullets merge, and weekly, monthly, yearly and significant ones, where the push is authoritative."""

from __future__ import annotations

from typing import Any

from django.db.models import F
from django.utils import timezone

from apps.memories.embeddings import text_hash
from apps.memories.models import Kind, Memory, Status
from apps.memories.services.memories import CHAT_ONLY_KINDS, entities_ensure
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedType
from apps.sync.services import daily
from apps.sync.services.feed import MEMORY_WRITABLE
from apps.sync.services.push.changes import APPLIED, MERGED, RESOLVED, Change, Outcome
from apps.sync.services.push.state import Push

AUTHORITATIVE_KINDS = {Kind.WEEKLY, Kind.MONTHLY, Kind.YEARLY, Kind.SIGNIFICANT}


def _memory_references(push: Push, change: Change, memory: Memory | None) -> dict[str, Any] | str:
    """The character, chat and superseding memory a change names, as column values; or why it cannot be
    applied."""
    values: dict[str, Any] = {}
    data = change.data
    if "character" in data:
        character = push.characters.get(data["character"]) if data["character"] is not None else None
        if data["character"] is not None and character is None:
            return "character_missing"
        values["character_id"] = character.pk if character else None
    if "chat" in data:
        chat = push.chats.get(data["chat"]) if data["chat"] is not None else None
        if data["chat"] is not None and chat is None:
            return "chat_missing"
        values["chat_id"] = chat.pk if chat else None
    if "superseded_by" in data:
        other = push.superseding.get(data["superseded_by"]) if data["superseded_by"] is not None else None
        if data["superseded_by"] is not None and (other is None or (memory is not None and other == memory.pk)):
            return "superseded_by_missing"
        values["superseded_by_id"] = other
    character = values.get("character_id", memory.character_id if memory else None)
    chat = values.get("chat_id", memory.chat_id if memory else None)
    kind = data.get("kind", memory.kind if memory else None)
    if character is None and chat is None:
        return "no_scope"
    if kind in CHAT_ONLY_KINDS and chat is None:
        return "no_scope"
    return values


SYNC_COLUMNS = ["clock", "changed_at", "changed_by", "participating_instances", "edited_by", "version", "updated_at"]
VECTOR_COLUMNS = ["content_hash", "embedding", "embedding_model", "embedding_dim"]


def _memory_write(push: Push, change: Change, memory: Memory, values: dict[str, Any], clock: dict) -> Memory:
    """Write the change's fields onto `memory` (new or stored) with `clock`, as the pushing instance's version;
    a stored one is updated in the columns that can change only (its vector stays unless the content moved)."""
    data = change.data
    columns = [name for name in MEMORY_WRITABLE if name in data] + list(values)
    for name in MEMORY_WRITABLE:
        if name in data:
            setattr(memory, name, data[name])
    for name, value in values.items():
        setattr(memory, name, value)
    if memory.kind == Kind.DAILY:
        memory.content = daily.daily_tag(memory.content, push.key)
        if "date" in data:
            memory.data = {**(memory.data or {}), "period": data["date"]}
            columns += ["content", "data"]
    memory.content = memory.content.strip()
    new_hash = text_hash(memory.content)
    if new_hash != memory.content_hash:
        memory.content_hash = new_hash
        memory.embedding, memory.embedding_model, memory.embedding_dim = None, "", None
        columns += VECTOR_COLUMNS
        push.embed = True
    if "participating_instances" in data:
        memory.participating_instances = list(dict.fromkeys(data["participating_instances"]))
    memory.participating_instances = push.participating(memory.participating_instances)
    memory.clock = clock
    memory.changed_at = change.modified_at
    memory.changed_by = push.key
    if change.op == "edit":
        memory.edited_by = push.key
    memory.updated_at = timezone.now()
    if memory.pk is None:
        memory.save()
        push.memories[memory.uid] = memory
        push.created(FeedType.MEMORY, memory.uid)
    else:
        memory.version += 1  # the row is locked: its version is the stored one
        push.write_later(memory, [*columns, *SYNC_COLUMNS])
    if "entities" in data:
        names = {str(e.get("name", "")).strip().lower() for e in data["entities"]}
        if names != push.entity_names.get(memory.pk, set()):
            entities = entities_ensure(user=push.user, character=memory.character, entities=data["entities"])
            memory.entities.set(entities)
            push.entity_names[memory.pk] = names
    return memory


def _daily_twin(push: Push, change: Change, values: dict[str, Any]) -> Memory | None:
    """The instance's daily memory of that day and character, if it has one already (under another uid)."""
    push.flush()
    day = change.data.get("date") or (change.data.get("data") or {}).get("period")
    character = values.get("character_id")
    if not day or character is None:
        return None
    return (
        Memory.objects.select_for_update()
        .defer("embedding")
        .filter(
            user=push.user,
            character_id=character,
            kind=Kind.DAILY,
            status=Status.ACTIVE,
            source_instance=push.key,
            data__period=day,
        )
        .order_by("id")
        .first()
    )


def _merge_daily(push: Push, change: Change, memory: Memory) -> Outcome:
    push.flush()
    clock = push.descending(clocks.merge(change.clock, memory.clock), memory.clock)
    merged = daily.daily_merge(memory.content, change.data.get("content", ""), push.key)
    if merged != memory.content:
        memory.content = merged
        memory.content_hash = text_hash(merged)
        memory.embedding, memory.embedding_model, memory.embedding_dim = None, "", None
        memory.changed_at = max(change.modified_at, memory.changed_at or change.modified_at)
        memory.changed_by = push.key
        push.embed = True
    memory.participating_instances = push.participating(memory.participating_instances)
    memory.clock = clock
    memory.save()
    return push.outcome(change, memory.uid, MERGED, clock, item=push.current(FeedType.MEMORY, memory.uid))


def _memory_delete(push: Push, change: Change, memory: Memory | None) -> Outcome:
    """Retire the memory (kept in its history) and leave its tombstone, whatever the clocks say."""
    uid = change.uid
    clock = clocks.merge(change.clock, memory.clock) if memory else change.clock
    if memory is not None:
        push.flush()
        Memory.objects.filter(pk=memory.pk).update(
            status=Status.RETIRED,
            retired_reason="deleted",
            version=F("version") + 1,
            clock=clock,
            changed_at=change.modified_at,
            changed_by=push.key,
        )
        push.memories.pop(uid, None)
    push.tombstone(FeedType.MEMORY, uid, clock)
    return push.outcome(change, uid, APPLIED, clock)


def apply_memory(push: Push, change: Change) -> Outcome:
    uid = change.uid
    push.check_available(change)
    if push.tombstoned(FeedType.MEMORY, uid):
        return push.refused(change, uid)
    memory = push.memories.get(uid)
    if memory is not None and push.entry(FeedType.MEMORY, uid) is None:
        return push.rejected(change, uid, "deleted")  # deleted, and its tombstone collected since
    if change.op == "delete":
        return _memory_delete(push, change, memory)
    if memory is None and change.op != "create":
        return push.rejected(change, uid, "unknown", clock={})
    values = _memory_references(push, change, memory)
    if isinstance(values, str):
        return push.rejected(change, uid, values, clock=memory.clock if memory else {})
    if memory is None:
        if change.data.get("kind") == Kind.DAILY:
            twin = _daily_twin(push, change, values)
            if twin is not None:
                return _merge_daily(push, change, twin)
        chat = values.get("chat_id")
        fresh = Memory(user=push.user, uid=uid, source_instance=push.key, origin="sync", source_chat_id=chat)
        memory = _memory_write(push, change, fresh, values, change.clock)
        return push.outcome(change, uid, APPLIED, change.clock)
    order = clocks.compare(change.clock, memory.clock)
    if order is Order.EQUAL:  # this version is the stored one: a retry
        return push.outcome(change, uid, APPLIED, memory.clock)
    merged = push.descending(clocks.merge(change.clock, memory.clock), memory.clock)
    if change.op == "edit":  # a person's correction overwrites, whatever the clocks say
        _memory_write(push, change, memory, values, merged)
        return push.outcome(change, uid, APPLIED, merged)
    if order is Order.AFTER:
        _memory_write(push, change, memory, values, change.clock)
        return push.outcome(change, uid, APPLIED, change.clock)
    if order is Order.BEFORE:
        return push.rejected(change, uid, "stale")
    if memory.kind == Kind.DAILY and change.data.get("kind", Kind.DAILY) == Kind.DAILY:
        return _merge_daily(push, change, memory)
    if memory.kind in AUTHORITATIVE_KINDS or push.incoming_wins(change, memory.changed_at, memory.changed_by):
        _memory_write(push, change, memory, values, merged)
        return push.outcome(change, uid, RESOLVED, merged, winner="incoming")
    push.flush()
    Memory.objects.filter(pk=memory.pk).update(clock=merged)
    memory.clock = merged
    return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.MEMORY, uid))
