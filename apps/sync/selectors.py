"""Reads of what sync keeps beside a chat; the chat itself comes from a user-scoped selector."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator

from django.db.models import Count, Max, Q, QuerySet
from django.http import Http404

from apps.chats.models import Chat
from apps.sync.models import Backup, ChatRevision, FeedEntry, Instance

REVISION_LIST_LIMIT = 100
CHUNK = 256 * 1024


def revision_list(*, chat: Chat) -> QuerySet[ChatRevision]:
    """The chat's kept versions, newest first, without their (possibly large) contents."""
    return ChatRevision.objects.filter(chat=chat).defer("jsonl_gzip")


def revision_get(*, chat: Chat, revision_id: int) -> ChatRevision:
    try:
        return ChatRevision.objects.get(chat=chat, pk=revision_id)
    except ChatRevision.DoesNotExist as exc:
        raise Http404("No such version of this chat.") from exc


def revision_lines(*, revision: ChatRevision) -> Iterator[bytes]:
    """The kept JSONL, decompressed a chunk at a time (a 100 MB chat is never held whole)."""
    with revision_stream(revision=revision) as stream:
        while chunk := stream.read(CHUNK):
            yield chunk


def revision_stream(*, revision: ChatRevision) -> gzip.GzipFile:
    return gzip.GzipFile(fileobj=io.BytesIO(bytes(revision.jsonl_gzip)))


def instance_list(*, user) -> QuerySet[Instance]:
    return Instance.objects.filter(user=user)


def instance_get(*, user, key: str) -> Instance:
    if "\x00" in key:  # no key holds one (PostgreSQL text cannot), and comparing with one fails in the database
        raise Http404("No instance with that key.")
    try:
        return Instance.objects.get(user=user, key=key)
    except Instance.DoesNotExist as exc:
        raise Http404("No instance with that key.") from exc


def sync_status(*, user, instance: Instance | None = None) -> dict:
    """Where the user's feed stands, and how far behind each instance is (changes it has not pulled yet, counting
    those no pull has ordered); tombstones wait until every instance has pulled past them."""
    entries = FeedEntry.objects.filter(user=user)
    counts = entries.aggregate(
        head=Max("seq"),
        unordered=Count("id", filter=Q(seq__isnull=True)),
        tombstones=Count("id", filter=Q(deleted_at__isnull=False)),
        objects=Count("id", filter=Q(deleted_at__isnull=True)),
    )
    head = counts["head"] or 0
    instances = list(instance_list(user=user))
    low = min((i.pulled_seq for i in instances), default=None)
    rows = []
    for item in instances:
        behind = entries.filter(seq__gt=item.pulled_seq).count() + counts["unordered"]
        rows.append({"instance": item, "behind": behind})
    held = (
        entries.filter(deleted_at__isnull=False).filter(Q(seq__isnull=True) | Q(seq__gt=low)).count()
        if low is not None
        else 0
    )
    status = {
        "head": head,
        "objects": counts["objects"],
        "tombstones": counts["tombstones"],
        "tombstones_held": held,
        "instances": rows,
    }
    if instance is not None:
        status["instance"] = next(row for row in rows if row["instance"].pk == instance.pk)
    return status


BACKUP_LIST_LIMIT = 50


def backup_list(*, user) -> QuerySet[Backup]:
    return Backup.objects.filter(user=user)[:BACKUP_LIST_LIMIT]


def backup_get(*, user, backup_id: int) -> Backup:
    try:
        return Backup.objects.get(user=user, pk=backup_id)
    except Backup.DoesNotExist as exc:
        raise Http404("No such backup.") from exc


def backups_active(*, user) -> bool:
    return Backup.objects.filter(user=user, state__in=[Backup.State.QUEUED, Backup.State.RUNNING]).exists()
