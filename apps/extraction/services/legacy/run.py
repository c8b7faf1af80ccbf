"""The legacy import's entry points, called by the API (apps/extraction/apis/legacy.py) and the chat page
(apps/extraction/views/legacy.py): what a chat carries that is not imported yet, and importing it. Each importer
reads its own extension's data (bme.py, smart.py, recap.py beside this file); common.py makes the memories."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.chats.models import Chat
from apps.common.exceptions import ApplicationError
from apps.extraction.services.legacy.bme import bme_items
from apps.extraction.services.legacy.common import Counts, count, memories_make, source_of
from apps.extraction.services.legacy.recap import recap_items
from apps.extraction.services.legacy.smart import smart_items, smart_settings_items
from apps.memories.models import Memory

log = logging.getLogger(__name__)
T = TypeVar("T")


# What a reader raises on data of another shape than its extension writes: a number where a list goes, a string
# where an object does. The data is a client's, kept as it came.
SHAPE_ERRORS = (TypeError, AttributeError, KeyError, ValueError)


def _read(source: str, reader: Callable[..., T], argument: Any, empty: T, counts: Counts | None = None) -> T:
    """A reader's items, or `empty` when the chat's data of that extension is in a shape it does not read (counted
    as unreadable on an import, so the person is told)."""
    try:
        return reader(argument)
    except SHAPE_ERRORS as error:
        log.warning("legacy %s data not read (%s: %s)", source, type(error).__name__, error)
        if counts is not None:
            count(counts, source, "unreadable (not in the shape the extension writes)", 1)
        return empty


def legacy_found(*, chat: Chat) -> dict[str, int]:
    """What the chat carries that is not imported yet, by source (items that would become memories)."""
    metadata = chat.chat_metadata if isinstance(chat.chat_metadata, dict) else {}
    bme, bme_summaries, _ = _read("st_bme", bme_items, metadata, ([], [], 0))
    smart, smart_summaries = _read("smart_memory", smart_items, metadata, ([], []))
    recap, recap_summaries = _read("auto_recap", recap_items, chat, ([], []))
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
    counts: Counts = {}
    bme, bme_summaries, compressed = _read("st_bme", bme_items, metadata, ([], [], 0), counts)
    smart, smart_summaries = _read("smart_memory", smart_items, metadata, ([], []), counts)
    recap, recap_summaries = _read("auto_recap", recap_items, chat, ([], []), counts)
    items = bme + smart + recap
    if compressed:
        count(counts, "st_bme", "left out (compressed into a parent)", compressed)
    if smart_memory_settings is not None:
        long_term, elsewhere = _read(
            "smart_memory", lambda given: smart_settings_items(given, characters), smart_memory_settings, ([], 0),
            counts,
        )  # fmt: skip
        items += long_term
        count(counts, "smart_memory", "characters not in this chat", elsewhere)
    summaries = smart_summaries + recap_summaries + bme_summaries
    memories_make(user=user, chat=chat, items=items, summaries=summaries, counts=counts)
    return counts
