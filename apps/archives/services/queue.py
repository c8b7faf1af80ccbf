"""Work archives send to their background task (apps/archives/tasks.py), by task name: services never import the
tasks module, which imports them. Sending never fails the caller (apps/common/tasks.task_send)."""

from __future__ import annotations

from apps.common.tasks import task_send


def enqueue_backup(backup_id: int) -> None:
    task_send("archives.backup", backup_id, catch_up="the job stays queued; the hourly check sends it again")
