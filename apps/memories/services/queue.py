"""Work the memory store sends to its background tasks (apps/memories/tasks.py), by task name: services never import
the tasks module, which imports them. Sending never fails the caller (apps/common/tasks.task_send)."""

from __future__ import annotations

from apps.common.tasks import task_send


def enqueue_index_chat(chat_id: int) -> None:
    # At once: a burst of writes to one chat coalesces without a wait, as the runs of one chat take turns (a
    # reconciliation finds the chat indexed at its integrity and returns) and one user's embedding is one run at a
    # time (the others leave it to the one running). See apps/memories/services/indexing.py.
    task_send("memories.index_chat", chat_id)


def enqueue_embed_pending(user_id: int, chat_id: int | None = None) -> None:
    task_send("memories.embed_pending", user_id, chat_id)


def enqueue_own_indexes(user_id: int) -> None:
    task_send("memories.own_indexes", user_id)


def enqueue_lifecycle_job(job_id: int) -> None:
    from apps.memories.models import LifecycleJob

    def failed(exc: Exception) -> None:  # a job the broker never got would sit "queued" forever: the page shows it
        LifecycleJob.objects.filter(pk=job_id, state=LifecycleJob.State.QUEUED).update(
            state=LifecycleJob.State.FAILED, error=f"could not reach the task queue: {exc}"
        )

    task_send("memories.lifecycle_job", job_id, on_failure=failed, catch_up="the job is marked failed")
