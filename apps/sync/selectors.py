"""Reads of what multi-device sync keeps: instances and their status."""

from __future__ import annotations

from django.db.models import Count, Max, Q, QuerySet
from django.http import Http404

from apps.sync.models import FeedEntry, Instance


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
