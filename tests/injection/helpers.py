"""Injection test helpers: the question a recall answers, messages said in a chat, and a chat and its recall read
back from the database."""

from __future__ import annotations

from apps.chats.models import Message
from apps.injection.services.recall import recall_stored

ASK = "Tell me about the lighthouse keeper's old dog."
DOG = "The lighthouse keeper's old dog is called Biscuit."


def say(chat, *turns: tuple[str, str]) -> None:
    """Messages `(name, text)`, a name of "Rowan" being the user."""
    start = chat.message_count
    Message.objects.bulk_create(
        Message(chat=chat, index=start + i, name=name, is_user=name == "Rowan", mes=text)
        for i, (name, text) in enumerate(turns)
    )
    chat.message_count = start + len(turns)
    chat.save(update_fields=["message_count"])


def stored(chat, index: int = 1):
    return recall_stored(Message.objects.get(chat=chat, index=index))
