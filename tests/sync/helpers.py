from apps.chats.models import Chat
from apps.chats.services.chats import chat_export_lines
from tests.chats.helpers import json_lines


def fresh(chat) -> Chat:
    """The chat as stored now."""
    return Chat.objects.get(pk=chat.pk)


def exported(chat) -> list:
    return json_lines(b"".join(chat_export_lines(chat=Chat.objects.get(pk=chat.pk))))


def if_match(chat_or_integrity) -> dict:
    """If-Match with a chat's integrity (as the object in hand holds it) or with an integrity given as is."""
    integrity = getattr(chat_or_integrity, "integrity", chat_or_integrity)
    return {"HTTP_IF_MATCH": f'"{integrity}"'}
