"""Links into a chat page."""

from django import template
from django.urls import reverse

register = template.Library()


@register.simple_tag
def message_url(chat_id: int, index: int) -> str:
    """The chat page opened around message `index`, scrolled to it and with it highlighted: the newest messages
    alone would leave an old message hundreds of pages up (apps/chats/views/chats.py, chat_detail)."""
    return f"{reverse('chats:detail', args=[chat_id])}?at={int(index)}"
