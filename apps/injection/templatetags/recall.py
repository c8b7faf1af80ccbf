"""A recall record as the card reads it, and its ISO times as dates the date filter can format."""

from django import template
from django.utils.dateparse import parse_datetime

from apps.common.moments import moment_kept
from apps.injection.services.recall import recall_readable

register = template.Library()


@register.filter
def readable_recall(value):
    """A message's kept recall (`extra.bme_recall`), its lists made lists of objects, or None (recall_readable)."""
    return recall_readable(value)


@register.filter
def when(value):
    """An ISO time as a datetime the date filter formats, or the text as it is: not a time, or not one Lorekeeper
    keeps (apps/common/moments.py; a client wrote the record, and the filter would pass year 1 in the person's time
    zone)."""
    try:
        moment = parse_datetime(str(value or ""))
    except ValueError:
        return value
    if moment is None or not moment_kept(moment):
        return value
    return moment


@register.filter
def other_slots(recall):
    """The slots other than the turn's own recall through which memories reached the prompt (the record's
    `prompt`, written by the context build)."""
    entries = (recall or {}).get("prompt") or []
    return [e for e in entries if isinstance(e, dict) and e.get("slot") != "triggered" and e.get("count")]
