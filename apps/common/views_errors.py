"""The site's own 400, 403 and 404 pages (config/urls.py names them): plain words, the site's look, a way back.
500 is apps/common/views.py `server_error`, which needs neither templates nor the database."""

from __future__ import annotations

from django.http import JsonResponse
from django.shortcuts import render

PAGES = {
    400: ("This request could not be read", "Something in it was not what the page expects. Go back and try again."),
    403: ("You cannot open this", "It belongs to someone else, or your session ended: sign in again and retry."),
    404: ("There is nothing here", "The address is wrong, or what it showed was deleted or belongs to someone else."),
}


def _page(request, status: int):
    heading, explanation = PAGES[status]
    if request.path.startswith("/api/"):  # a client of the API reads JSON, as from every other answer there
        return JsonResponse({"message": f"{heading}.", "extra": {}}, status=status)
    return render(request, "error.html", {"heading": heading, "explanation": explanation}, status=status)


def bad_request(request, exception=None):
    return _page(request, 400)


def permission_denied(request, exception=None):
    return _page(request, 403)


def page_not_found(request, exception=None):
    return _page(request, 404)
