"""What a page's form is bound to."""

from __future__ import annotations


def posted(request):
    """A POST's data, even with no field in it, else None (a GET shows the form unbound). `request.POST or None`
    left an empty POST unbound: never valid, and with no error saying which field was missing."""
    return request.POST if request.method == "POST" else None
