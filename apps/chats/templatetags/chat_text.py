"""Message text: markdown allowed, HTML sanitised (a `<script>` in a message never runs)."""

import json

import nh3
from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from apps.chats.send_dates import parse_send_date
from apps.common.templatetags.local_time import local_time

register = template.Library()

# Raw HTML is allowed through the markdown renderer (roleplay text uses <br>, <font>, <details>) and then cleaned
# by nh3, which keeps formatting tags and drops scripts, styles, event handlers and javascript: links.
_markdown = MarkdownIt("commonmark", {"html": True, "breaks": True})


@register.filter
def render_markdown(text: str) -> SafeString:
    return mark_safe(nh3.clean(_markdown.render(text or ""), link_rel="noopener noreferrer nofollow"))


# A message longer than FOLD_ABOVE characters shows its first FOLD_HEAD until the person asks for the rest: a
# 300,000-character message took a browser 15 s to lay out, and the chat page showed nothing meanwhile.
FOLD_ABOVE, FOLD_HEAD = 20_000, 4_000


@register.filter
def is_long(text: str) -> bool:
    return len(text or "") > FOLD_ABOVE


@register.filter
def render_markdown_head(text: str) -> SafeString:
    """The start of a long message, cut at the last paragraph (else line, else word) before FOLD_HEAD."""
    head = (text or "")[:FOLD_HEAD]
    for mark in ("\n\n", "\n", " "):
        cut = head.rfind(mark)
        if cut > FOLD_HEAD // 2:
            head = head[:cut]
            break
    return render_markdown(head + " …")


@register.filter
def pretty_json(value) -> str:
    """JSON for a textarea (autoescaped by the template like any other text)."""
    return json.dumps(value, ensure_ascii=False, indent=2)


@register.filter
def sent_at(value):
    """A message's send_date in the reader's time zone (the `local_time` filter), whichever of SillyTavern's forms
    it is stored in; a text no form reads is shown as it is."""
    moment = parse_send_date(value)
    return local_time(moment) if moment else value
