"""`{{ message|ticks }}`: a message written for the API as well as for pages, its `field` names in backticks (as
Markdown writes code), shown on a page with those names as code rather than with the backticks."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()
_TICKED = re.compile(r"`([^`\n]+)`")


@register.filter
def ticks(text) -> str:
    return mark_safe(_TICKED.sub(r"<code>\1</code>", escape(str(text))))  # escaped first: only <code> is ours
