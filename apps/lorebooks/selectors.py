"""Reads of lorebooks, scoped to the requesting user."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db.models import Count, QuerySet
from django.http import Http404

from apps.lorebooks.models import Lorebook, LorebookEntry


def lorebook_list(*, user: AbstractUser) -> QuerySet[Lorebook]:
    return Lorebook.objects.filter(user=user).annotate(entry_count=Count("entries"))


def lorebook_get(*, user: AbstractUser, lorebook_id: int) -> Lorebook:
    """The user's book with its `entry_count`; another user's is a 404."""
    book = lorebook_list(user=user).filter(id=lorebook_id).first()
    if book is None:
        raise Http404("No such lorebook.")
    return book


def lorebook_entries(*, book: Lorebook) -> QuerySet[LorebookEntry]:
    return book.entries.order_by("uid")
