"""The one pagination of the API's lists: by id, newest first, with DRF's cursor."""

from __future__ import annotations

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination

from apps.common.ids import id_from


class ListPagination(CursorPagination):
    """50 a page (`limit` up to 200), newest first. A cursor holds the id it goes on from: one whose position is not
    an id (a client made it up or changed it) is refused as DRF refuses a cursor it cannot read, "Invalid cursor"
    (404), not compared with the ids (which failed the request)."""

    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    ordering = "-id"

    def decode_cursor(self, request):
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None and id_from(cursor.position) is None:
            raise NotFound(self.invalid_cursor_message)
        return cursor
