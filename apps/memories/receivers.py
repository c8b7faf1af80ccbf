"""What the memories app does when the chats app below it says something happened (apps/chats/signals.py).
Connected in MemoriesConfig.ready."""

from __future__ import annotations

from django.dispatch import receiver

from apps.chats.signals import character_delete_preview, character_deleting, chat_progress, chat_written
from apps.memories.selectors import character_memory_counts
from apps.memories.services.characters import character_memories_release
from apps.memories.services.indexing import chat_index_progress, chat_index_schedule


@receiver(chat_written, dispatch_uid="memories.chat_written")
def _follow_chat(sender, *, chat_id: int, **kwargs) -> None:
    chat_index_schedule(chat_id=chat_id)


@receiver(character_deleting, dispatch_uid="memories.character_deleting")
def _release_character_memories(sender, *, character, delete_chat_memories: bool, **kwargs) -> dict[str, int]:
    return character_memories_release(character=character, delete_chat_memories=delete_chat_memories)


@receiver(character_delete_preview, dispatch_uid="memories.character_delete_preview")
def _count_character_memories(sender, *, character, **kwargs) -> dict[str, int]:
    return character_memory_counts(character=character)


@receiver(chat_progress, dispatch_uid="memories.chat_progress")
def _chat_index_progress(sender, *, chat, **kwargs) -> dict[str, int]:
    return chat_index_progress(chat=chat)
