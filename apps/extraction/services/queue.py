"""Work the extraction pipeline sends to its background tasks (apps/extraction/tasks.py), by task name: services
never import the tasks module, which imports them. Sending never fails the caller (apps/common/tasks.task_send)."""

from __future__ import annotations

from celery import current_app

from apps.common.tasks import task_send


def enqueue_run(chat_id: int, countdown: float = 0) -> None:
    if countdown and current_app.conf.task_always_eager:
        return  # in-place execution cannot wait: the sweep (or the test) runs it when due
    task_send("extraction.run_chat", chat_id, countdown=countdown)


def enqueue_model_test(test_id: int) -> None:
    from apps.extraction.models import ModelTest

    def failed(exc: Exception) -> None:  # a test the broker never got would sit "queued" forever: say so on it
        ModelTest.objects.filter(pk=test_id, state=ModelTest.State.QUEUED).update(
            state=ModelTest.State.FAILED, error=f"could not reach the task queue: {exc}"
        )

    task_send("extraction.model_test", test_id, on_failure=failed, catch_up="the test is marked failed")
