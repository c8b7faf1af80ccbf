"""A moment on a page, in the reader's own time zone: the server writes it in its own (UTC on a deployment) inside
<time datetime="…" data-local>, and static/js/app.js rewrites it in the browser's zone and way of writing dates."""

from django import template
from django.utils import dateformat, timezone
from django.utils.html import format_html

register = template.Library()

FORMATS = {"datetime": "Y-m-d H:i", "seconds": "Y-m-d H:i:s", "time": "H:i:s"}


@register.filter
def local_time(moment, style: str = "datetime"):
    """`{{ call.created_at|local_time }}`; `|local_time:"time"` for the time of day alone. Empty for None (so
    `|default:` applies)."""
    if not moment:
        return ""
    shown = dateformat.format(timezone.localtime(moment), FORMATS.get(style, FORMATS["datetime"]))
    return format_html(
        '<time datetime="{}" data-local="{}" title="{}">{}</time>',
        moment.isoformat(),
        style,
        shown + " " + timezone.get_current_timezone_name(),
        shown,
    )
