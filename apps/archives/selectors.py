"""Reads of the account's backups and archive jobs."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from apps.archives.models import Backup

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
