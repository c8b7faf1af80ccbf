"""Writing memories: by hand (the API, the memory browser), from extraction (apps/extraction), and as the lifecycle
decides (apps/memories/services/lifecycle/): a memory seen again is reconfirmed, one replaced is superseded. The
entities they name are registered by apps/memories/services/entities.py.

Edits bump `version` and clear the vector when the content changes; the vector is made again in the background
(apps.memories.tasks.embed_pending), never inside the request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Least

from apps.chats.models import Character, Chat
from apps.common.exceptions import ApplicationError
from apps.common.tasks import on_commit_once
from apps.memories.embeddings import text_hash
from apps.memories.models import Kind, Memory, Retired, Status
from apps.memories.services import queue
from apps.memories.services.entities import entities_ensure
from apps.memories.services.lifecycle.scope import lifecycle_config
from apps.memories.signals import memory_restored

CHAT_ONLY_KINDS = {Kind.MESSAGE, Kind.SUMMARY, Kind.SCENE_RECAP}
EDITABLE_FIELDS = ("content", "kind", "importance", "confidence", "time_scope", "valid_from", "valid_to", "data")


def embed_later(*, user_id: int) -> None:
    on_commit_once(queue.enqueue_embed_pending, user_id)


def scope_check(*, user: AbstractUser, character: Character | None, chat: Chat | None, kind: str) -> None:
    if character is None and chat is None:
        raise ApplicationError("A memory belongs to a character or to a chat: give one.", {"field": "character"})
    if character is not None and character.user_id != user.pk or chat is not None and chat.user_id != user.pk:
        raise ApplicationError("Unknown character or chat.", {"field": "character"})
    if kind in CHAT_ONLY_KINDS and chat is None:
        raise ApplicationError(f"A {kind} memory belongs to a chat: give `chat`.", {"field": "chat"})
    if chat is not None and character is not None and not chat.characters.filter(pk=character.pk).exists():
        raise ApplicationError("That character does not take part in that chat.", {"field": "character"})


@transaction.atomic
def memory_create(
    *,
    user: AbstractUser,
    kind: str,
    content: str,
    character: Character | None = None,
    chat: Chat | None = None,
    importance: int = 2,
    confidence: float = 0.7,
    entities: Iterable[dict[str, Any]] = (),
    source_chat: Chat | None = None,
    source_message_indices: Iterable[int] = (),
    source_instance: str = "",
    embedding: list[float] | None = None,
    embedding_model: str = "",
    origin: str = "",
    **fields: Any,
) -> Memory:
    """A memory stored as given. Candidates from extraction or the API go through
    apps.memories.services.lifecycle.classify.memories_submit, which classifies them first and calls this."""
    if kind == Kind.MESSAGE:
        raise ApplicationError("Message memories are made from the chat itself, not by hand.", {"field": "kind"})
    scope_check(user=user, character=character, chat=chat, kind=kind)
    content = content.strip()
    if not content:
        raise ApplicationError("A memory needs content.", {"field": "content"})
    memory = Memory.objects.create(
        user=user,
        character=character,
        chat=chat,
        kind=kind,
        content=content,
        content_hash=text_hash(content),
        importance=importance,
        confidence=confidence,
        source_chat=source_chat or chat,
        source_message_indices=sorted(set(source_message_indices)),
        source_instance=source_instance,
        participating_instances=[source_instance] if source_instance else [],
        embedding=embedding,
        embedding_model=embedding_model if embedding is not None else "",
        embedding_dim=len(embedding) if embedding is not None else None,
        origin=origin,
        **{k: v for k, v in fields.items() if k in EDITABLE_FIELDS or k in ("occurred_at", "superseded_by")},
    )
    entity_list = list(entities)
    if entity_list:
        memory.entities.set(entities_ensure(user=user, character=character, entities=entity_list))
    if embedding is None:
        embed_later(user_id=user.pk)
    return memory


class VersionConflict(ApplicationError):
    def __init__(self, memory: Memory) -> None:
        super().__init__(
            "The memory was changed by another client since you read it; read it again and re-apply your change.",
            {"current_version": memory.version},
            status=409,
            code="version",
        )


@transaction.atomic
def memory_update(
    *,
    memory: Memory,
    data: dict[str, Any],
    entities: Iterable[dict[str, Any]] | None = None,
    edited_by: str = "",
    expected_version: int | None = None,
) -> Memory:
    """Change a memory in place (a user's correction): version + 1, and a new vector when the content changed.
    `edited_by`: who corrected it (an instance's key, "web", "api", "admin"), kept on the memory. Message memories
    follow their message and are not edited here. Given the version the editor read, a memory changed since
    answers VersionConflict (409); the check and the write are one step under the row lock."""
    if memory.kind == Kind.MESSAGE:
        raise ApplicationError("A message memory follows its message: edit the message instead.", {"field": "kind"})
    memory = Memory.objects.select_for_update().get(pk=memory.pk)
    if expected_version is not None and memory.version != expected_version:
        raise VersionConflict(memory)
    if data.get("kind") == Kind.MESSAGE:
        raise ApplicationError("A memory cannot become a message memory.", {"field": "kind"})
    changed = [key for key in EDITABLE_FIELDS if key in data and data[key] != getattr(memory, key)]
    for key in changed:
        setattr(memory, key, data[key])
    if memory.kind in CHAT_ONLY_KINDS and memory.chat_id is None:
        raise ApplicationError(
            f"A {memory.kind} memory belongs to a chat; this one belongs to a character.", {"field": "kind"}
        )
    if memory.valid_from is not None and memory.valid_to is not None and memory.valid_to < memory.valid_from:
        raise ApplicationError("valid_to must not be before valid_from.", {"field": "valid_to"})
    if "content" in changed:
        memory.content = memory.content.strip()
        if not memory.content:
            raise ApplicationError("A memory needs content.", {"field": "content"})
        memory.content_hash = text_hash(memory.content)
        memory.embedding, memory.embedding_model, memory.embedding_dim = None, "", None
        changed += ["content_hash", "embedding", "embedding_model", "embedding_dim"]
        embed_later(user_id=memory.user_id)
    if entities is not None:
        memory.entities.set(entities_ensure(user=memory.user, character=memory.character, entities=entities))
    if changed or entities is not None:
        memory.version = F("version") + 1
        memory.edited_by = edited_by[:64]
        memory.save(update_fields=[*changed, "version", "edited_by", "updated_at"])
        memory.refresh_from_db()
    return memory


@transaction.atomic
def memory_retire(*, memory: Memory, reason: str = "deleted") -> Memory:
    """Retiring keeps the memory (its history, the supersession chain) but takes it out of search and injection."""
    if memory.kind == Kind.MESSAGE:
        raise ApplicationError("A message memory leaves the index when its message is deleted.", {"field": "kind"})
    # Retiring a retired memory changes nothing (a retried DELETE answers the same).
    Memory.objects.filter(pk=memory.pk, status=Status.ACTIVE).update(
        status=Status.RETIRED, retired_reason=reason, version=F("version") + 1
    )
    memory.refresh_from_db()
    return memory


@transaction.atomic
def memory_restore(*, memory: Memory) -> Memory:
    restored = Memory.objects.filter(pk=memory.pk, status=Status.RETIRED, superseded_by__isnull=True).update(
        status=Status.ACTIVE, retired_reason="", version=F("version") + 1
    )
    if restored:  # deleted on an instance: it comes back there too
        memory_restored.send(sender=Memory, memory=memory)
    memory.refresh_from_db()
    if memory.status != Status.ACTIVE:
        raise ApplicationError(
            "A superseded memory stays retired: restore the one that replaced it instead.", {"field": "status"}
        )
    return memory


def memory_reconfirm(*, memory: Memory, source_message_indices: list[int] = ()) -> None:
    """Seen again: confidence + boost (at most 1), unconfirmed counter back to 0, sources merged."""
    boost = lifecycle_config()["confidence"]["boost"]
    indices = sorted(set(memory.source_message_indices) | set(source_message_indices))
    Memory.objects.filter(pk=memory.pk).update(
        confidence=Least(F("confidence") + boost, 1.0),
        unconfirmed_count=0,
        source_message_indices=indices,
        version=F("version") + 1,
    )


def memory_supersede(*, old: Memory, new: Memory) -> None:
    """`new` replaces `old`: the old one is retired (kept, with its history) and holds until the new one's start."""
    valid_to = new.valid_from if new.valid_from is not None else old.valid_to
    Memory.objects.filter(pk=old.pk).update(
        status=Status.RETIRED,
        retired_reason=Retired.SUPERSEDED,
        superseded_by=new,
        valid_to=valid_to,
        version=F("version") + 1,
    )
