from apps.chats.models import Chat
from apps.chats.services.chats import chat_export_lines
from tests.chats.helpers import json_lines


def exported(chat) -> list:
    return json_lines(b"".join(chat_export_lines(chat=Chat.objects.get(pk=chat.pk))))


def if_match(chat_or_integrity) -> dict:
    integrity = getattr(chat_or_integrity, "integrity", chat_or_integrity)
    return {"HTTP_IF_MATCH": f'"{integrity}"'}
