"""Applying a push's changes to lorebooks: a book travels whole (name, scope, World Info file), and concurrent
versions are settled by last write wins, as characters are. A book's clock counts a change to any of its entries
(apps/sync/triggers.py), so a push that replaces the entries sets the clock it answers once they are written.

A name another of the user's books holds is not refused: the pushed book takes "<name> (2)", as an archive's does,
and the answer carries the stored version so that the instance adopts the name."""

from __future__ import annotations

from typing import Any

from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_put
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedType
from apps.sync.services.push.changes import Change, Outcome
from apps.sync.services.push.identity import apply_whole
from apps.sync.services.push.state import Push


def apply_lorebook(push: Push, change: Change) -> Outcome:
    def remove(book: Lorebook) -> None:
        book.delete()
        push.lorebooks.pop(change.uid, None)

    return apply_whole(
        push, change, push.lorebooks.get(change.uid), write=lambda book, clock: _written(push, change, book, clock),
        remove=remove,
    )  # fmt: skip


def _written(push: Push, change: Change, book: Lorebook | None, clock: dict) -> dict[str, Any]:
    """The change written (its entries replaced when it carries its file), then the book's clock and change
    record set as this instance's: after the entries, whose writes the trigger would otherwise count as the
    server's."""
    data = change.data
    name = data.get("name", book.name if book else "")
    # Unless the instance had this version when it made its own, what it replaces is kept as a revision: a
    # concurrent change that last write wins settled for the instance, or a person's correction (op "edit") made
    # without it. Only before the push's first change of the book: what its later ones replace is its own (a push
    # of many stale edits of one book would otherwise push every earlier version out of the kept ones).
    seen = book is not None and clocks.compare(change.clock, book.clock) is Order.AFTER
    first = change.uid not in push.books_written
    push.books_written.add(change.uid)
    kept_as = "" if seen or not first else f"Replaced by {push.instance.name or push.key}'s version (sync)"
    stored, _ = lorebook_put(
        user=push.user,
        uid=change.uid,
        name=name,
        scope=data.get("scope", book.scope if book else Lorebook.Scope.LINKED),
        data=data.get("book"),
        rename=True,
        kept_as=kept_as,
    )
    participating = push.participating(book.participating_instances if book else [])
    Lorebook.objects.filter(pk=stored.pk).update(
        clock=clock,
        changed_at=change.modified_at,
        changed_by=push.key,
        participating_instances=participating,
        **({"source_instance": push.key} if book is None else {}),
    )
    stored.refresh_from_db()
    push.lorebooks[stored.uid] = stored
    if book is None:
        push.created(FeedType.LOREBOOK, stored.uid)
    if stored.name != name:  # another book of the user's holds the name: the instance takes the new one
        return {"item": push.current(FeedType.LOREBOOK, stored.uid)}
    return {}
