"""Message text: markdown allowed, HTML sanitised (a `<script>` in a message never runs)."""

import json

import nh3
from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

register = template.Library()

# Raw HTML is allowed through the markdown renderer (roleplay text uses <br>, <font>, <details>) and then cleaned
# by nh3, which keeps formatting tags and drops scripts, styles, event handlers and javascript: links.
_markdown = MarkdownIt("commonmark", {"html": True, "breaks": True})


@register.filter
def render_markdown(text: str) -> SafeString:
    return mark_safe(nh3.clean(_markdown.render(text or ""), link_rel="noopener noreferrer nofollow"))


@register.filter
def pretty_json(value) -> str:
    """JSON for a textarea (autoescaped by the template like any other text)."""
    return json.dumps(value, ensure_ascii=False, indent=2)
