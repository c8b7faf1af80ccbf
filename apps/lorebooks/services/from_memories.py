"""A character's or a chat's memories as a World Info file SillyTavern loads as it is (docs/LOREBOOKS.md, "Memories
as a lorebook"): one entry per active memory of the kinds a lorebook holds, keyed by the names and aliases of the
entities it is about.

- Keys: the names and aliases of the memory's entities, each once whatever its case. The exported character's own
  name is left out when the memory has other keys: nearly every message of its chats mentions it, and an entry
  keyed by it would fire on all of them.
- A memory without entities has no key to be found by: it is exported `vectorized`, for SillyTavern's Vector
  Storage (and Lorekeeper's own search) to activate by meaning.
- What the world knows (facts, relationships, states, profiles, canon) goes before the character; what happened
  (events, scenes, revelations, developments, arcs) after it.
- Order follows importance (SillyTavern keeps the highest order first when the budget is short); the most important
  and newest memories come first when there are more than a book holds.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db.models import Prefetch

from apps.chats import selectors as chat_selectors
from apps.lorebooks.services.fields import FIELDS, MAX_ENTRIES, MAX_KEY_LENGTH, MAX_KEYS
from apps.memories import selectors as memory_selectors
from apps.memories.models import Entity, Kind, Status

KNOWLEDGE = (Kind.FACT, Kind.RELATIONSHIP, Kind.PREFERENCE, Kind.STATE, Kind.PROFILE, Kind.CANON)
HAPPENINGS = (Kind.EVENT, Kind.SCENE, Kind.REVELATION, Kind.DEVELOPMENT, Kind.ARC)
POSITION = {**{kind: 0 for kind in KNOWLEDGE}, **{kind: 1 for kind in HAPPENINGS}}
COMMENT_LENGTH = 60


def _keys(entities: list[Entity], own: set[str]) -> list[str]:
    seen: set[str] = set()
    keys = []
    for entity in entities:
        for name in (entity.name, *entity.aliases):
            name = name.strip()
            if name and len(name) <= MAX_KEY_LENGTH and name.casefold() not in seen:
                seen.add(name.casefold())
                keys.append(name)
    others = [key for key in keys if key.casefold() not in own]
    return (others or keys)[:MAX_KEYS]


def _comment(kind: str, content: str) -> str:
    line = " ".join(content.split())
    if len(line) > COMMENT_LENGTH:
        line = line[: COMMENT_LENGTH - 1].rstrip() + "…"
    return f"{Kind(kind).label}: {line}"


def memories_world(
    *, user: AbstractUser, character_id: int | None = None, chat_id: int | None = None
) -> tuple[str, dict[str, Any]]:
    """(the book's name, the World Info file) of the character's memories (its own and those of its chats) or the
    chat's (its own and its characters' persistent ones), as the memories page lists them."""
    if chat_id is not None:
        chat = chat_selectors.chat_get(user=user, chat_id=chat_id)
        name = f"{chat.title or 'Chat'} memories"
        own = {character.name.casefold() for character in chat.characters.all()}
    else:
        character = chat_selectors.character_get(user=user, character_id=character_id)
        name = f"{character.name} memories"
        own = {character.name.casefold()}
    memories = (
        memory_selectors.memory_list(
            user=user, character_id=character_id, chat_id=chat_id, kinds=list(POSITION), status=Status.ACTIVE
        )
        .prefetch_related(Prefetch("entities", queryset=Entity.objects.only("id", "name", "aliases").order_by("id")))
        .order_by("-importance", "-created_at", "-id")[:MAX_ENTRIES]
    )
    entries = {}
    for uid, memory in enumerate(memories):
        keys = _keys(list(memory.entities.all()), own)
        entries[str(uid)] = {
            **{field: default for field, (_, default) in FIELDS.items()},
            "uid": uid,
            "key": keys,
            "comment": _comment(memory.kind, memory.content),
            "content": memory.content,
            "vectorized": not keys,
            "selective": False,
            "addMemo": True,
            "order": 100 * memory.importance,
            "position": POSITION[memory.kind],
            "displayIndex": uid,
        }
    return name, {"entries": entries}
