"""A book's earlier versions: what a client's copy or a restore replaced, when nothing else holds it.

SillyTavern keeps its own copy of each book, and the extension sends it when a chat opens and when it changes
(services/books.py `chat_books_put`). A book edited here (its entry form, the API, another device) since the
client's copy was taken would be lost when that copy came again: so a copy sent again unchanged is not taken (what
was edited here stays), and a changed one is taken with this book's version kept as a revision first; so is a
version that a person's import with replace, or another device's sync that had not seen it, replaced. A revision
restores in place of the book (services/books.py `lorebook_revision_restore`; the book as it is then kept as one in
turn) and downloads as a World Info file.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db.models import F, Func, IntegerField

from apps.lorebooks.models import Lorebook, LorebookRevision

KEPT = 20  # revisions kept per book, the newest
KEPT_BYTES = 64 * 1024 * 1024  # and as many of those as fit in this much storage (the newest one always kept)


def book_digest(data: Any) -> str:
    """A World Info file's digest, the same for the same JSON whatever the order of its keys. ASCII: a lone
    surrogate a client sent is digested too (and refused by the import with its field named)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def client_copy_taken(*, book: Lorebook, sent: str, export: dict[str, Any]) -> None:
    """The book is now the client's copy, whose digest is `sent` and its export here `export`: recorded, so that
    the same copy sent again is known, and an edit here after it told apart."""
    book.client_digest, book.client_export_digest = sent, book_digest(export)
    Lorebook.objects.filter(pk=book.pk).update(
        client_digest=book.client_digest, client_export_digest=book.client_export_digest
    )


def edited_here(*, book: Lorebook, export: dict[str, Any]) -> bool:
    """Whether the book, whose export is `export`, differs from the client's copy it was last made (or was never
    one): replacing it would lose what only this server holds."""
    return not book.client_export_digest or book_digest(export) != book.client_export_digest


def revision_keep(*, book: Lorebook, reason: str, data: dict[str, Any]) -> LorebookRevision:
    """The book's content `data` (its export) kept as a revision; past KEPT, or past KEPT_BYTES of storage (as
    PostgreSQL stores them, compressed), the oldest of the book's revisions go: a book of 10,000 long entries
    edited back and forth takes a bounded room."""
    revision = LorebookRevision.objects.create(
        user_id=book.user_id, lorebook=book, data=data, entry_count=len(data.get("entries") or {}), reason=reason
    )
    newest = (
        LorebookRevision.objects.filter(lorebook=book)
        .order_by("-created_at", "-id")
        .annotate(size=Func(F("data"), function="pg_column_size", output_field=IntegerField()))
        .values_list("id", "size")
    )
    kept, stored = 0, 0
    stale = []
    for pk, size in newest:
        stored += size
        if kept and (kept == KEPT or stored > KEPT_BYTES):
            stale.append(pk)
        else:
            kept += 1
    LorebookRevision.objects.filter(id__in=stale).delete()
    return revision
