"""Background work of the extraction pipeline: thin tasks over apps.extraction.services.

`run_chat` is the chat's runner (one at a time per chat, see services/runner.py); it is acks_late, so a worker
killed mid-job has the task delivered again, and the job records in PostgreSQL make that harmless. Sending a task
never fails the caller: the records are the outbox, and the sweep sends what did not get through.
"""

from __future__ import annotations

import logging

from celery import shared_task

from apps.extraction.services import queue

log = logging.getLogger(__name__)
JOBS_PER_RUN = 25  # then the chat's runner steps back behind other chats' work (an imported chat has hundreds)


@shared_task(name="extraction.run_chat", acks_late=True, soft_time_limit=3600, time_limit=3700)
def run_chat(chat_id: int) -> dict:
    from apps.extraction.services.runner import chat_run

    result = chat_run(chat_id=chat_id, max_jobs=JOBS_PER_RUN)
    if result.get("more"):
        queue.enqueue_run(chat_id)  # behind the other chats' work already queued
    elif result.get("retry_in") is not None:
        queue.enqueue_run(chat_id, countdown=result["retry_in"] + 0.5)
    return {"ran": len(result["ran"]), "busy": result.get("busy", False)}


@shared_task(name="extraction.sweep", soft_time_limit=120, time_limit=150)
def sweep() -> int:
    from apps.extraction.services.sweep import chats_to_run

    chats = chats_to_run()
    for chat_id in chats:
        queue.enqueue_run(chat_id)
    return len(chats)


@shared_task(name="extraction.prune_jobs", soft_time_limit=600, time_limit=660)
def prune_jobs() -> int:
    from apps.extraction.services.jobs import jobs_prune

    return jobs_prune()


@shared_task(name="extraction.model_test", acks_late=True, soft_time_limit=1800, time_limit=1900)
def model_test(test_id: int) -> str:
    from apps.extraction.services.model_test import model_test_run

    test = model_test_run(test_id=test_id)
    return test.state if test else "missing"
