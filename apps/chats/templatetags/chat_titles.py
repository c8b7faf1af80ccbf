"""A chat's title as the pages show it (apps/chats/titles.py): `{{ chat|chat_title }}` in the page's text, where a
chat Lorekeeper started shows its moment in the reader's time zone (static/js/app.js, as `local_time` does), and
`{{ chat|chat_title_text }}` where only plain text goes (a window's title, an attribute)."""

from datetime import UTC

from django import template
from django.utils.html import format_html

from apps.chats.titles import file_name_title, moment_shown, title_shown

register = template.Library()


@register.filter
def chat_title(chat):
    parsed = file_name_title(chat.title, getattr(chat, "created_at", None))
    if parsed is None:
        return chat.title
    if not parsed.utc:
        return parsed.shown
    moment = parsed.moment.replace(tzinfo=UTC)
    return format_html(
        '{}, <time datetime="{}" data-local="title" title="{}">{}</time>{}',
        parsed.names,
        moment.isoformat(),
        chat.title,
        moment_shown(parsed.moment) + " UTC",
        parsed.branch,
    )


@register.filter
def chat_title_text(chat) -> str:
    return title_shown(chat.title, getattr(chat, "created_at", None))
