"""`sync_push`: a push's changes applied in order, all or none, under the user's push lock (the rules: the package's
docstring, apps/sync/services/push/__init__.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.common.exceptions import ApplicationError
from apps.memories.services.memories import embed_later
from apps.sync.models import FeedEntry, FeedType, Instance
from apps.sync.services.feed import feed_head, feed_order
from apps.sync.services.push.changes import Change, Pushed, changes_check
from apps.sync.services.push.identity import apply_character, apply_settings
from apps.sync.services.push.lorebooks import apply_lorebook
from apps.sync.services.push.memories import apply_memory
from apps.sync.services.push.state import Push

PUSH_LOCK = 0x5350  # pg_advisory_xact_lock(PUSH_LOCK, user id): one push of a user at a time
FEED_CONSTRAINT = "sync_feed_one_per_object"  # apps.sync.models.FeedEntry: one entry per object

APPLY = {
    FeedType.MEMORY: apply_memory,
    FeedType.CHARACTER: apply_character,
    FeedType.SETTINGS: apply_settings,
    FeedType.LOREBOOK: apply_lorebook,
}


def _uid_clash(exc: IntegrityError) -> bool:
    """A unique violation of an object's uid (its table's, or the feed's one entry per object)."""
    cause = exc.__cause__
    constraint = getattr(getattr(cause, "diag", None), "constraint_name", None) or ""
    return getattr(cause, "sqlstate", None) == "23505" and ("uid" in constraint or constraint == FEED_CONSTRAINT)


@transaction.atomic
def sync_push(*, user: AbstractUser, instance: Instance, changes: list[Change]) -> Pushed:
    """Apply `changes` in order, all or none (a change that cannot be applied by the rules is answered
    `rejected`, not an error; bad input is an ApplicationError naming the change and nothing is stored).

    The answer's cursor moves the instance past its own changes when nothing else reached the feed since its
    cursor; otherwise it stays, and the next pull brings the rest."""
    changes_check(changes)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [PUSH_LOCK, user.pk])
    push = Push(user, instance)
    try:
        push.preload(changes)
        now = timezone.now()
        outcomes = []
        for change in changes:
            change.modified_at = min(change.modified_at, now + timedelta(seconds=1))  # a client's clock ahead of ours
            outcomes.append(APPLY[change.type](push, change))
        push.flush()
    except IntegrityError as exc:
        # Another account committed the same uid after the preload looked (its push holds its own lock, not ours).
        if not _uid_clash(exc):
            raise
        raise ApplicationError(
            "A uid in this push was taken meanwhile; give the object a new one.",
            {"field": "changes"},
            status=409,
            code="uid_unavailable",
        ) from exc
    if push.embed:
        embed_later(user_id=user.pk)
    cursor = _cursor_after(push, pushed=len(changes), now=now)
    return Pushed(outcomes, cursor)


def _cursor_after(push: Push, *, pushed: int, now: datetime) -> int:
    """The instance's cursor after its push: past its own changes when nothing else reached the feed since its
    cursor, where it was otherwise. Recorded on the instance with its push's count and time."""
    user, instance = push.user, push.instance
    feed_order(user_id=user.pk)
    head = feed_head(user_id=user.pk)
    cursor = instance.pulled_seq
    others = (
        FeedEntry.objects.filter(user=user, seq__gt=instance.pulled_seq, seq__lte=head)
        .exclude(uid__in=push.touched)
        .exists()
    )
    if not others:
        cursor = head
    Instance.objects.filter(pk=instance.pk).update(
        pulled_seq=max(instance.pulled_seq, cursor),
        pushed_items=F("pushed_items") + pushed,
        last_push_at=now,
    )
    instance.refresh_from_db()
    return cursor
