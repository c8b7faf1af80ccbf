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
