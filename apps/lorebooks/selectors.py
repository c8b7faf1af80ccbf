"""Reads of lorebooks, scoped to the requesting user."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db.models import Count, QuerySet
from django.db.models.fields.json import KT
from django.http import Http404

from apps.common.holds import holds
from apps.common.jsonsafe import text_stored
from apps.lorebooks.models import Lorebook, LorebookEntry, LorebookRevision


def lorebook_list(*, user: AbstractUser, search: str = "") -> QuerySet[Lorebook]:
    """The user's books by name, each with its `entry_count`; with `search`, those whose name holds it (what no
    name holds and PostgreSQL refuses in a query, NUL and a lone surrogate, left out of it)."""
    # Ordered here: a query that counts (GROUP BY) takes no model's default order.
    books = Lorebook.objects.filter(user=user).annotate(entry_count=Count("entries")).order_by("name", "id")
    search = text_stored(search).strip()
    return books.filter(holds("name", search)) if search else books


def lorebook_names(*, user: AbstractUser) -> list[str]:
    return list(Lorebook.objects.filter(user=user).order_by("name", "id").values_list("name", flat=True))


def lorebook_get(*, user: AbstractUser, lorebook_id: int) -> Lorebook:
    """The user's book with its `entry_count`; another user's is a 404."""
    book = lorebook_list(user=user).filter(id=lorebook_id).first()
    if book is None:
        raise Http404("No such lorebook.")
    return book


def lorebook_entries(*, book: Lorebook, query: str = "") -> QuerySet[LorebookEntry]:
    """The book's entries by uid; with `query`, those whose title, keys or content hold it (a NUL character, which
    no stored text holds and PostgreSQL refuses in a query, left out of it)."""
    query = query.replace("\x00", "")
    entries = book.entries.order_by("uid")
    if query:
        entries = entries.filter(
            holds(KT("data__comment"), query) | holds(KT("data__content"), query) | holds(KT("data__key"), query)
        )
    return entries


def lorebook_entry(*, book: Lorebook, uid: int) -> LorebookEntry | None:
    return book.entries.filter(uid=uid).first()


def lorebook_revisions(*, book: Lorebook) -> QuerySet[LorebookRevision]:
    """The book's earlier versions, newest first, without their content (`data` is loaded when read)."""
    return book.revisions.defer("data").order_by("-created_at", "-id")


def lorebook_revision_get(*, user: AbstractUser, lorebook_id: int, revision_id: int) -> LorebookRevision:
    """A revision of the user's book `lorebook_id`; another user's, or another book's, is a 404."""
    revision = (
        LorebookRevision.objects.select_related("lorebook")
        .filter(user=user, lorebook_id=lorebook_id, lorebook__user=user, id=revision_id)
        .first()
    )
    if revision is None:
        raise Http404("No such version of this lorebook.")
    return revision
