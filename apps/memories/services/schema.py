"""Versioned memory schema per character and per chat (as Smart Memory's migrations, docs/GLOSSARY.md): registries of
steps applied in order on load, each once, never removed, so a chat or character from any earlier version can be
brought up to date.

A step is a function of the character or chat; it must be safe to run on data that already looks migrated
(a step can be interrupted after its work and before the version is recorded).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from apps.chats.models import Character, Chat
from apps.memories.models import MemoryScope
from apps.memories.services.entities import entities_ensure, entity_name_clean


def _character_v1_register_self(character: Character) -> None:
    """The character is the first entity of its own registry (so the graph boost knows its name), unless the registry
    already has it under that name or as an alias."""
    if entity_name_clean(character.name):
        entities_ensure(
            user=character.user, character=character, entities=[{"name": character.name, "type": "character"}]
        )


def _chat_v1_index_messages(chat: Chat) -> None:
    """Chats from before the recall layer existed get their messages indexed. In place, not by scheduling an index
    task: the index task is what ensures the schema, right after it has reconciled (so this finds the chat indexed),
    and a task scheduled from there would be a second run for every chat imported."""
    from apps.memories.services.indexing import chat_index_messages

    chat_index_messages(chat_id=chat.pk)


CHARACTER_MIGRATIONS: list[tuple[int, str, Callable[[Character], None]]] = [
    (1, "register the character as an entity", _character_v1_register_self),
]
CHAT_MIGRATIONS: list[tuple[int, str, Callable[[Chat], None]]] = [
    (1, "index messages for recall", _chat_v1_index_messages),
]
CHARACTER_SCHEMA_VERSION = CHARACTER_MIGRATIONS[-1][0]
CHAT_SCHEMA_VERSION = CHAT_MIGRATIONS[-1][0]


def _apply(scope: MemoryScope, registry: list, owner) -> MemoryScope:
    for version, _name, step in registry:
        if version > scope.schema_version:
            step(owner)
            scope.schema_version = version
    scope.save()
    return scope


@transaction.atomic
def character_schema_ensure(*, character: Character) -> MemoryScope:
    scope, _ = MemoryScope.objects.select_for_update().get_or_create(character=character)
    return _apply(scope, CHARACTER_MIGRATIONS, character)


@transaction.atomic
def chat_schema_ensure(*, chat: Chat) -> MemoryScope:
    """The chat's steps, then those of each of its characters."""
    scope, _ = MemoryScope.objects.select_for_update().get_or_create(chat=chat)
    _apply(scope, CHAT_MIGRATIONS, chat)
    for character in chat.characters.all():
        character_schema_ensure(character=character)
    return scope
