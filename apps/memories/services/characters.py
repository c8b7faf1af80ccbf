"""What becomes of a character's memories when the character is deleted (apps.chats.services.characters)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce

from apps.chats.models import Character
from apps.memories.models import Memory
from apps.memories.selectors import FROM_CHATS


@transaction.atomic
def character_memories_release(*, character: Character, delete_chat_memories: bool) -> dict[str, int]:
    """Before the character is deleted (which deletes every memory still naming it): unless `delete_chat_memories`,
    the memories a chat taught it or holds leave the character for that chat, where search and injection still find
    them (a memory needs a character or a chat; one drawn from a chat by extraction moves into that chat's own
    scope). Answers how many memories the deletion will take and how many were kept."""
    kept = 0
    if not delete_chat_memories:
        kept = Memory.objects.filter(FROM_CHATS, character=character).update(
            chat=Coalesce(F("chat"), F("source_chat")), character=None, version=F("version") + 1
        )
    return {"memories_deleted": Memory.objects.filter(character=character).count(), "memories_kept": kept}
