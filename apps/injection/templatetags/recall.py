"""A recall record's ISO times, as dates the date filter can format."""

from django import template
from django.utils.dateparse import parse_datetime

register = template.Library()


@register.filter
def when(value):
    try:
        return parse_datetime(str(value or "")) or value
    except ValueError:
        return value


@register.filter
def other_slots(recall):
    """The slots other than the turn's own recall through which memories reached the prompt (the record's
    `prompt`, written by the context build)."""
    entries = (recall or {}).get("prompt") or []
    return [e for e in entries if isinstance(e, dict) and e.get("slot") != "triggered" and e.get("count")]
