"""What a page's form is bound to, and fields its forms share."""

from __future__ import annotations

from django import forms


def posted(request):
    """A POST's data, even with no field in it, else None (a GET shows the form unbound). `request.POST or None`
    left an empty POST unbound: never valid, and with no error saying which field was missing."""
    return request.POST if request.method == "POST" else None


class TextareaField(forms.CharField):
    """A textarea's text with its lines ended as typed, "\\n". Browsers send a textarea's lines ended "\\r\\n" (as
    HTML says), so a card saved with only its tags changed had every line of its example messages changed too, in
    its download and its backup."""

    widget = forms.Textarea

    def to_python(self, value):
        value = super().to_python(value)
        return as_typed(value) if isinstance(value, str) else value


def as_typed(text: str) -> str:
    """A textarea's text with its lines ended "\n", as typed (a browser sends "\r\n")."""
    return text.replace("\r\n", "\n").replace("\r", "\n")
