from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.chats.models import Character
from apps.memories.services.characters import character_memories_release

CHARACTER_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "system_prompt",
    "creator_notes",
    "tags",
    "card_data",
)


@transaction.atomic
def character_create(*, user: AbstractUser, name: str, **fields: Any) -> Character:
    return Character.objects.create(user=user, name=name, **{k: v for k, v in fields.items() if k in CHARACTER_FIELDS})


@transaction.atomic
def character_update(*, character: Character, data: dict[str, Any]) -> Character:
    changed = [key for key in CHARACTER_FIELDS if key in data]
    for key in changed:
        setattr(character, key, data[key])
    character.save(update_fields=[*changed, "updated_at"])
    return character


@transaction.atomic
def character_delete(*, character: Character, delete_chat_memories: bool = False) -> dict[str, int]:
    """Deleting a character keeps its chats (they simply lose that participant) and, unless `delete_chat_memories`,
    the memories drawn from them (apps.memories.services.characters); its own other memories go with it. Answers
    `memories_deleted` and `memories_kept`.

    The character is locked first, so no memory naming it is committed between the count and the deletion."""
    character = Character.objects.select_for_update().get(pk=character.pk)
    counts = character_memories_release(character=character, delete_chat_memories=delete_chat_memories)
    character.delete()
    return counts


def characters_for_names(*, user: AbstractUser, names: list[str]) -> list[Character]:
    """The user's characters with these names, creating those that do not exist yet (first match by name wins)."""
    wanted = [name for name in dict.fromkeys(n.strip()[:200] for n in names) if name]
    existing: dict[str, Character] = {}
    for character in Character.objects.filter(user=user, name__in=wanted).order_by("id"):
        existing.setdefault(character.name, character)
    missing = [Character(user=user, name=name) for name in wanted if name not in existing]
    for character in Character.objects.bulk_create(missing):
        existing[character.name] = character
    return [existing[name] for name in wanted]
