"""The entity registries (apps/memories/models.py `Entity`): one for the user and one per character. A registry holds
one entity per name, names compared trimmed and in any case (the database's unique name per registry), and a name
that is an entity's alias means that entity, so what extraction, the API and sync register lands on the entity a
person already has. Renaming keeps the old name as an alias; merging folds one entity into another of its registry.

The sync feed carries each memory with its entities' names, types and aliases (apps/sync/services/feed.py), and a
change of links or of an entity does not touch the memory's row: a rename, an edit or a merge bumps the version of
the memories whose entities changed, so the feed's triggers send them again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, transaction
from django.db.models import F

from apps.chats.models import Character
from apps.common.exceptions import ApplicationError
from apps.common.services import model_update
from apps.memories.models import Entity, Memory
from apps.memories.selectors import entity_by_name

NAME_LENGTH = 200
TYPE_LENGTH = 50


def entity_name_clean(name: Any) -> str:
    """A name as a registry keeps it: trimmed, at most 200 characters (and trimmed again after the cut)."""
    return str(name).strip()[:NAME_LENGTH].strip()


def aliases_union(*, name: str, aliases: Iterable[Any]) -> list[str]:
    """`aliases` cleaned as names, in order, without blanks, repeats in another case, or the entity's own name."""
    seen = {name.strip().casefold()}
    result = []
    for alias in aliases:
        alias = entity_name_clean(alias)
        if alias and alias.casefold() not in seen:
            seen.add(alias.casefold())
            result.append(alias)
    return result


def _memories_touch(*, memory_ids: Iterable[int]) -> None:
    """The memories' entities changed: a new version puts them back on the sync feed."""
    Memory.objects.filter(pk__in=list(memory_ids)).update(version=F("version") + 1)


def _entity_create(*, user: AbstractUser, character: Character | None, name: str, item: dict[str, Any]) -> Entity:
    """A new entity, or the one a concurrent registration of the same name made first."""
    try:
        with transaction.atomic():
            return Entity.objects.create(
                user=user,
                character=character,
                name=name,
                type=str(item.get("type") or "").strip()[:TYPE_LENGTH],
                aliases=aliases_union(name=name, aliases=item.get("aliases") or []),
            )
    except IntegrityError:
        found = entity_by_name(user=user, character_id=character.pk if character else None, name=name)
        if found is None:
            raise
        return found


def entities_ensure(
    *, user: AbstractUser, character: Character | None, entities: Iterable[dict[str, Any]]
) -> list[Entity]:
    """The registry entries for these `{name, type?, aliases?}`, each once: the entity of that name (any case,
    trimmed) or alias where there is one, its missing aliases and empty type filled in; a new one otherwise."""
    result: dict[int, Entity] = {}
    character_id = character.pk if character else None
    for item in entities:
        name = entity_name_clean(item.get("name", ""))
        if not name:
            raise ApplicationError("An entity needs a name.", {"field": "entities"})
        entity = entity_by_name(user=user, character_id=character_id, name=name)
        if entity is None:
            entity = _entity_create(user=user, character=character, name=name, item=item)
        else:
            aliases = aliases_union(name=entity.name, aliases=[*entity.aliases, *(item.get("aliases") or [])])
            kind = entity.type or str(item.get("type") or "").strip()[:TYPE_LENGTH]
            model_update(instance=entity, fields=["aliases", "type"], data={"aliases": aliases, "type": kind})
        result.setdefault(entity.pk, entity)
    return list(result.values())


def _name_taken(*, user: AbstractUser, entity: Entity, name: str) -> None:
    """Refuse a name another entity of the registry goes by: the two are one, and merging says so."""
    other = entity_by_name(user=user, character_id=entity.character_id, name=name, exclude_id=entity.pk)
    if other is None:
        return
    if other.name.strip().casefold() == name.casefold():
        message = f"Another entity already has that name. To make them one, merge “{entity.name}” into it."
    else:
        message = f"“{other.name}” already goes by that name. To make them one, merge “{entity.name}” into it."
    raise ApplicationError(message, {"field": "name", "entity": other.pk})


def _entity_locked(*, user: AbstractUser, entity: Entity) -> Entity:
    try:
        return Entity.objects.select_for_update().get(user=user, pk=entity.pk)
    except Entity.DoesNotExist as exc:
        raise ApplicationError("Unknown entity.", {"field": "entity"}) from exc


def _renamed(*, user: AbstractUser, entity: Entity, name: str) -> bool:
    """Give the locked `entity` a new name, its old one kept as an alias; whether anything changed."""
    name = entity_name_clean(name)
    if not name:
        raise ApplicationError("An entity needs a name.", {"field": "name"})
    if name == entity.name:
        return False
    _name_taken(user=user, entity=entity, name=name)
    aliases = aliases_union(name=name, aliases=[*entity.aliases, entity.name])
    return model_update(instance=entity, fields=["name", "aliases"], data={"name": name, "aliases": aliases})[1]


@transaction.atomic
def entity_rename(*, user: AbstractUser, entity: Entity, name: str) -> Entity:
    """A new name; the old one stays as an alias, so the memories and chats that use it still find the entity. A
    name another entity of the registry has, as its name or an alias, is refused: merge the two instead."""
    entity = _entity_locked(user=user, entity=entity)
    if _renamed(user=user, entity=entity, name=name):
        _memories_touch(memory_ids=entity.memories.values_list("pk", flat=True))
    return entity


@transaction.atomic
def entity_update(*, user: AbstractUser, entity: Entity, data: dict[str, Any]) -> Entity:
    """Name, type and aliases, those given. A new name follows entity_rename (refused when taken, the old name kept
    as an alias), unless the aliases are given too: then the list given is the whole list."""
    entity = _entity_locked(user=user, entity=entity)
    renamed = "name" in data and _renamed(user=user, entity=entity, name=data["name"])
    fields = {}
    if "type" in data:
        fields["type"] = str(data["type"]).strip()[:TYPE_LENGTH]
    if "aliases" in data:
        fields["aliases"] = aliases_union(name=entity.name, aliases=data["aliases"])
    _, updated = model_update(instance=entity, fields=["type", "aliases"], data=fields)
    if renamed or updated:
        _memories_touch(memory_ids=entity.memories.values_list("pk", flat=True))
    return entity


def registry_name(entity: Entity) -> str:
    return f"{entity.character.name}'s" if entity.character_id else "user-wide"


def entities_merge_check(*, entities: Iterable[Entity]) -> None:
    """Entities merge within one registry only: a character's registry and the user-wide one stay apart, as the
    same name may mean someone else in each."""
    entities = list(entities)
    if len({entity.character_id for entity in entities}) > 1:
        owners = "; ".join(f"“{entity.name}” is {registry_name(entity)}" for entity in entities)
        raise ApplicationError(
            f"Only entities of one registry (one character's, or the user-wide one) can be merged: {owners}.",
            {"field": "into"},
        )


@transaction.atomic
def entity_merge(*, user: AbstractUser, keep: Entity, merge: Entity) -> Entity:
    """`merge` folds into `keep`: its memories are linked to `keep`, its name and aliases become `keep`'s aliases,
    its type fills `keep`'s when that is empty, and it is deleted. Both must be the user's and of one registry."""
    if keep.pk == merge.pk:
        raise ApplicationError("An entity cannot be merged into itself: choose another one.", {"field": "into"})
    locked = {
        e.pk: e
        for e in Entity.objects.select_for_update(of=("self",))
        .select_related("character")
        .filter(user=user, pk__in=[keep.pk, merge.pk])
    }
    if len(locked) != 2:
        raise ApplicationError("Only your own entities can be merged.", {"field": "into"})
    keep, merge = locked[keep.pk], locked[merge.pk]
    entities_merge_check(entities=[merge, keep])
    through = Memory.entities.through
    moved = set(through.objects.filter(entity_id=merge.pk).values_list("memory_id", flat=True))
    through.objects.bulk_create(
        [through(memory_id=memory_id, entity_id=keep.pk) for memory_id in sorted(moved)], ignore_conflicts=True
    )
    aliases = aliases_union(name=keep.name, aliases=[*keep.aliases, merge.name, *merge.aliases])
    model_update(instance=keep, fields=["aliases", "type"], data={"aliases": aliases, "type": keep.type or merge.type})
    merge.delete()
    _memories_touch(memory_ids=keep.memories.values_list("pk", flat=True))
    return keep


@transaction.atomic
def entities_merge(*, user: AbstractUser, keep: Entity, merge: Iterable[Entity]) -> Entity:
    """Each of `merge` folds into `keep` (entity_merge), all or none."""
    for entity in merge:
        if entity.pk != keep.pk:
            keep = entity_merge(user=user, keep=keep, merge=entity)
    return keep
