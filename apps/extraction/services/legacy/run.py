"""The legacy import's entry points, called by the API (apps/extraction/apis/legacy.py) and the chat page
(apps/extraction/views/legacy.py): what a chat carries that is not imported yet, and importing it. Each importer
reads its own extension's data (bme.py, smart.py, recap.py beside this file); common.py makes the memories."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.chats.models import Chat
from apps.common.exceptions import ApplicationError
from apps.extraction.services.legacy.bme import bme_items
from apps.extraction.services.legacy.common import Counts, count, memories_make, source_of
from apps.extraction.services.legacy.recap import recap_items
from apps.extraction.services.legacy.smart import smart_items, smart_settings_items
from apps.memories.models import Memory


def legacy_found(*, chat: Chat) -> dict[str, int]:
    """What the chat carries that is not imported yet, by source (items that would become memories)."""
    metadata = chat.chat_metadata if isinstance(chat.chat_metadata, dict) else {}
    bme, bme_summaries, _ = bme_items(metadata)
    smart, smart_summaries = smart_items(metadata)
    recap, recap_summaries = recap_items(chat)
    keys = [i.key for i in bme + smart + recap]
    summaries = smart_summaries + recap_summaries + bme_summaries
    if summaries:
        keys.append(summaries[0]["key"])  # one summary at most
    done = set(
        Memory.objects.filter(user_id=chat.user_id, origin="import", data__legacy__key__in=keys).values_list(
            "data__legacy__key", flat=True
        )
    )
    found: dict[str, int] = {}
    for key in keys:
        if key not in done:
            found[source_of(key)] = found.get(source_of(key), 0) + 1
    return found


@transaction.atomic
def chat_legacy_import(
    *, user: AbstractUser, chat: Chat, smart_memory_settings: dict[str, Any] | None = None
) -> dict[str, dict[str, int]]:
    """Import the chat's legacy extension data as memories (see apps/extraction/services/legacy/__init__.py). Returns,
    by source, how many were imported, already there, or left out."""
    if chat.user_id != user.pk:
        raise ApplicationError("Unknown chat.", {"field": "chat"}, status=404)
    chat = Chat.objects.select_for_update().get(pk=chat.pk)
    metadata = chat.chat_metadata if isinstance(chat.chat_metadata, dict) else {}
    characters = {c.name.strip().lower(): c for c in chat.characters.all()}
    bme, bme_summaries, compressed = bme_items(metadata)
    smart, smart_summaries = smart_items(metadata)
    recap, recap_summaries = recap_items(chat)
    items = bme + smart + recap
    counts: Counts = {}
    if compressed:
        count(counts, "st_bme", "left out (compressed into a parent)", compressed)
    if smart_memory_settings is not None:
        long_term, elsewhere = smart_settings_items(smart_memory_settings, characters)
        items += long_term
        count(counts, "smart_memory", "characters not in this chat", elsewhere)
    summaries = smart_summaries + recap_summaries + bme_summaries
    memories_make(user=user, chat=chat, items=items, summaries=summaries, counts=counts)
    return counts
