"""Background work of lorebooks: a thin task over services/meaning.py."""

from __future__ import annotations

from celery import shared_task

from apps.lorebooks.services.meaning import vectors_prepare


@shared_task(name="lorebooks.prepare_vectors", acks_late=True, soft_time_limit=600, time_limit=660)
def prepare_vectors(book_id: int) -> int:
    """Embed a book's vectorized entries ahead of their first use (sent when the book is written)."""
    return vectors_prepare(book_id=book_id)
