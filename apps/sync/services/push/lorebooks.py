"""Applying a push's changes to lorebooks: a book travels whole (name, scope, World Info file), and concurrent
versions are settled by last write wins, as characters are. A book's clock counts a change to any of its entries
(apps/sync/triggers.py), so a push that replaces the entries sets the clock it answers once they are written.

A name another of the user's books holds is not refused: the pushed book takes "<name> (2)", as an archive's does,
and the answer carries the stored version so that the instance adopts the name."""

from __future__ import annotations

from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_put
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedType
from apps.sync.services.push.changes import APPLIED, RESOLVED, Change, Outcome
from apps.sync.services.push.state import Push


def apply_lorebook(push: Push, change: Change) -> Outcome:
    uid = change.uid
    push.check_available(change)
    if push.tombstoned(FeedType.LOREBOOK, uid):
        return push.refused(change, uid)
    book = push.lorebooks.get(uid)
    if change.op == "delete":
        clock = clocks.merge(change.clock, book.clock) if book else change.clock
        if book is not None:
            book.delete()
            push.lorebooks.pop(uid, None)
        push.tombstone(FeedType.LOREBOOK, uid, clock)
        return push.outcome(change, uid, APPLIED, clock)
    if book is None:
        if change.op != "create":
            return push.rejected(change, uid, "unknown", clock={})
        return _written(push, change, None, change.clock, APPLIED)
    order = clocks.compare(change.clock, book.clock)
    if order is Order.EQUAL:
        return push.outcome(change, uid, APPLIED, book.clock)
    merged = push.descending(clocks.merge(change.clock, book.clock), book.clock)
    if change.op == "edit" or order is Order.AFTER:
        return _written(push, change, book, merged if change.op == "edit" else change.clock, APPLIED)
    if order is Order.BEFORE:
        return push.rejected(change, uid, "stale")
    if push.incoming_wins(change, book.changed_at, book.changed_by):
        return _written(push, change, book, merged, RESOLVED, winner="incoming")
    Lorebook.objects.filter(pk=book.pk).update(clock=merged)
    book.clock = merged
    return push.outcome(change, uid, RESOLVED, merged, winner="server", item=push.current(FeedType.LOREBOOK, uid))


def _written(push: Push, change: Change, book: Lorebook | None, clock: dict, result: str, **extra) -> Outcome:
    """The change written (its entries replaced when it carries its file), then the book's clock and change
    record set as this instance's: after the entries, whose writes the trigger would otherwise count as the
    server's."""
    data = change.data
    name = data.get("name", book.name if book else "")
    stored, _ = lorebook_put(
        user=push.user,
        uid=change.uid,
        name=name,
        scope=data.get("scope", book.scope if book else Lorebook.Scope.LINKED),
        data=data.get("book"),
        rename=True,
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
        extra["item"] = push.current(FeedType.LOREBOOK, stored.uid)
    return push.outcome(change, stored.uid, result, clock, **extra)
