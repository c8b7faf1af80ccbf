"""Applying a push's changes to the identity documents, characters and the settings document: last write wins
between concurrent versions."""

from __future__ import annotations

import uuid as uuid_module

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


def apply_character(push: Push, change: Change) -> Outcome:
    uid = change.uid
    push.check_available(change)
    if push.tombstoned(FeedType.CHARACTER, uid):
        return push.refused(change, uid)
    character = push.characters.get(uid)
    if change.op == "delete":
        clock = clocks.merge(change.clock, character.clock) if character else change.clock
        if character is not None:
            push.flush()
            character.delete()  # its persistent memories go with it, each leaving a tombstone
            push.characters.pop(uid, None)
            push.memories = {k: m for k, m in push.memories.items() if m.character_id != character.pk}
        push.tombstone(FeedType.CHARACTER, uid, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if character is None:
        if change.op != "create":
            return push.rejected(change, uid, "unknown", clock={})
        character = Character(user=push.user, uid=uid, source_instance=push.key)
        _character_write(push, change, character, change.clock)
        return push.outcome(change, uid, APPLIED, change.clock)
    order = clocks.compare(change.clock, character.clock)
    if order is Order.EQUAL:
        return push.outcome(change, uid, APPLIED, character.clock)
    merged = push.descending(clocks.merge(change.clock, character.clock), character.clock)
    if change.op == "edit" or order is Order.AFTER:
        clock = merged if change.op == "edit" else change.clock
        _character_write(push, change, character, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if order is Order.BEFORE:
        return push.rejected(change, uid, "stale")
    if push.incoming_wins(change, character.changed_at, character.changed_by):
        _character_write(push, change, character, merged)
        return push.outcome(change, uid, RESOLVED, merged, winner="incoming")
    Character.objects.filter(pk=character.pk).update(clock=merged)
    character.clock = merged
    return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.CHARACTER, uid))


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
