"""Request checks every page and API operation shares."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse


class RefuseNulCharacters:
    """PostgreSQL cannot store or compare text holding a NUL character: a query parameter or a path segment with one
    would reach a lookup and fail there as a server error. Refused here with 400 naming where it was, before any
    view runs. (JSON bodies and files are checked where they are parsed, naming the field or line.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = None
        if "\x00" in request.path:
            where = "path"
        else:
            for name, values in request.GET.lists():
                if "\x00" in name or any("\x00" in value for value in values):
                    where = name.replace("\x00", "\\u0000")
                    break
        if where is None:
            return self.get_response(request)
        message = f"The {'path' if where == 'path' else f'query parameter {where!r}'} contains a NUL character."
        if request.path.startswith("/api/"):
            return JsonResponse({"message": message, "extra": {"field": where}}, status=400)
        return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
