"""Applying a push's changes to the identity documents, characters and the settings document: last write wins
between concurrent versions. `apply_whole` holds the rules for any object that travels whole (lorebooks use it too:
push/lorebooks.py)."""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable
from typing import Any

from apps.accounts.models import SettingsDocument
from apps.accounts.services import settings_document_get
from apps.chats.models import Character
from apps.chats.services.characters import CHARACTER_FIELDS
from apps.common.exceptions import ApplicationError
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedType
from apps.sync.services.push.changes import APPLIED, RESOLVED, Change, Outcome
from apps.sync.services.push.state import Push


def apply_whole(
    push: Push,
    change: Change,
    stored,
    *,
    write: Callable[[Any, dict], dict[str, Any]],
    remove: Callable[[Any], None],
) -> Outcome:
    """The rules for an object that travels whole (a character, a lorebook) against its `stored` version (None:
    none here): a deletion is final; a create or a descendant is written; a retry changes nothing; a stale change is
    rejected with the stored version; concurrent ones are settled by last write wins, the result's clock descending
    from both. `write(stored, clock)` writes the change (answering what the outcome adds, such as an `item`),
    `remove(stored)` deletes the stored object."""
    uid, kind = change.uid, change.type
    push.check_available(change)
    if push.tombstoned(kind, uid):
        return push.refused(change, uid)
    if change.op == "delete":
        clock = clocks.merge(change.clock, stored.clock) if stored is not None else change.clock
        if stored is not None:
            remove(stored)
        push.tombstone(kind, uid, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if stored is None:
        if change.op != "create":
            return push.rejected(change, uid, "unknown", clock={})
        return push.outcome(change, uid, APPLIED, change.clock, **write(None, change.clock))
    order = clocks.compare(change.clock, stored.clock)
    if order is Order.EQUAL:
        return push.outcome(change, uid, APPLIED, stored.clock)
    merged = push.descending(clocks.merge(change.clock, stored.clock), stored.clock)
    if change.op == "edit" or order is Order.AFTER:
        clock = merged if change.op == "edit" else change.clock
        return push.outcome(change, uid, APPLIED, clock, **write(stored, clock))
    if order is Order.BEFORE:
        return push.rejected(change, uid, "stale")
    if push.incoming_wins(change, stored.changed_at, stored.changed_by):
        return push.outcome(change, uid, RESOLVED, merged, winner="incoming", **write(stored, merged))
    type(stored).objects.filter(pk=stored.pk).update(clock=merged)
    stored.clock = merged
    return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(kind, uid))


def apply_character(push: Push, change: Change) -> Outcome:
    def write(character: Character | None, clock: dict) -> dict[str, Any]:
        if character is None:
            character = Character(user=push.user, uid=change.uid, source_instance=push.key)
        _character_write(push, change, character, clock)
        return {}

    def remove(character: Character) -> None:
        push.flush()
        character.delete()  # its persistent memories go with it, each leaving a tombstone
        push.characters.pop(change.uid, None)
        push.memories = {k: m for k, m in push.memories.items() if m.character_id != character.pk}

    return apply_whole(push, change, push.characters.get(change.uid), write=write, remove=remove)


def _character_write(push: Push, change: Change, character: Character, clock: dict) -> None:
    for name in CHARACTER_FIELDS:
        if name in change.data:
            setattr(character, name, change.data[name])
    if not character.name:
        raise ApplicationError("A character needs a name.", {"field": f"changes[{change.index}].data.name"})
    character.participating_instances = push.participating(character.participating_instances)
    character.clock = clock
    character.changed_at = change.modified_at
    character.changed_by = push.key
    created = character.pk is None
    character.save()
    push.characters[character.uid] = character
    if created:
        push.created(FeedType.CHARACTER, character.uid)


def apply_settings(push: Push, change: Change) -> Outcome:
    settings_document_get(user=push.user)
    document = SettingsDocument.objects.select_for_update().get(user=push.user)
    uid = document.uid
    order = clocks.compare(change.clock, document.clock)
    if order is Order.EQUAL:
        return push.outcome(change, uid, APPLIED, document.clock)
    merged = push.descending(clocks.merge(change.clock, document.clock), document.clock)
    resolved = order is Order.CONCURRENT and change.op != "edit"
    if order is Order.BEFORE and change.op != "edit":
        return push.rejected(change, uid, "stale")
    if resolved and not push.incoming_wins(change, document.changed_at, document.changed_by):
        SettingsDocument.objects.filter(pk=document.pk).update(clock=merged)
        return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.SETTINGS, uid))
    clock = change.clock if order is Order.AFTER and change.op != "edit" else merged
    document.data = change.data["document"]
    document.integrity = uuid_module.uuid4()  # the document changed: a Luker-style If-Match must see it
    document.participating_instances = push.participating(document.participating_instances)
    document.clock = clock
    document.changed_at = change.modified_at
    document.changed_by = push.key
    document.save()
    if resolved:
        return push.outcome(change, uid, RESOLVED, clock, winner="incoming")
    return push.outcome(change, uid, APPLIED, clock)
