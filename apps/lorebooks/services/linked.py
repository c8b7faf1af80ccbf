"""The book a chat links (SillyTavern's Chat Lore): the name in its metadata, `chat_metadata.world_info`
(docs/LOREBOOKS.md, "Which books a chat scans"), chosen on the chat page."""

from __future__ import annotations

from django.db import transaction

from apps.chats.models import Chat
from apps.chats.services.chats import chat_lock, chat_update

CHAT_LORE = "world_info"


def chat_lore(chat: Chat) -> str:
    """The name of the book the chat links, or ""."""
    name = (chat.chat_metadata or {}).get(CHAT_LORE) if isinstance(chat.chat_metadata, dict) else None
    return name if isinstance(name, str) else ""


@transaction.atomic
def chat_lore_set(*, chat: Chat, name: str) -> Chat:
    """Link the book `name` to the chat ("" unlinks it). The metadata is read again under the chat's lock, so that
    what a reply or a device wrote into it meanwhile (sticky entries, another extension's keys) is kept."""
    chat = chat_lock(chat=chat)
    metadata = dict(chat.chat_metadata) if isinstance(chat.chat_metadata, dict) else {}
    if name:
        metadata[CHAT_LORE] = name
    elif CHAT_LORE in metadata:
        del metadata[CHAT_LORE]
    else:
        return chat
    return chat_update(chat=chat, data={"chat_metadata": metadata})
