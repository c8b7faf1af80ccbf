"""Tasks every app shares, and the one way to send a task."""

from __future__ import annotations

import logging
from collections.abc import Callable

from celery import current_app, shared_task

log = logging.getLogger(__name__)


def registered(name: str):
    """The task registered under `name` (`<app>.<task>`). Each app's `AppConfig.ready` imports its tasks module, so
    any process that has set Django up knows every task, a web worker as well as a Celery worker."""
    try:
        return current_app.tasks[name]
    except KeyError:
        raise LookupError(f"no task is registered as {name!r}: does its app's AppConfig.ready import it?") from None


def task_send(
    task,
    *args,
    countdown: float = 0,
    on_failure: Callable[[Exception], None] | None = None,
    catch_up: str = "the periodic sweep will catch up",
) -> bool:
    """Queue `task(*args)` without ever failing the caller: broker trouble is logged and answered False. `task` is a
    task or its registered name (so services can send their app's tasks without importing its tasks module). The work
    is then only late, because each app keeps its work in PostgreSQL (the outbox) and a periodic task sends what
    did not get through; `catch_up` says which, for the log. `on_failure` records the failure where a person
    looks (a job shown as failed). No retry: fail fast, the caller is usually a request."""
    try:
        if isinstance(task, str):
            task = registered(task)
        task.apply_async(args, retry=False, countdown=countdown or None)
    except Exception as exc:  # noqa: BLE001 — whatever the broker raises, the caller's write stands
        log.warning("could not enqueue %s%s (%s): %s", getattr(task, "name", task), args, catch_up, exc)
        if on_failure is not None:
            on_failure(exc)
        return False
    return True


@shared_task(name="common.ping", ignore_result=False, soft_time_limit=10, time_limit=20)
def ping(value: str) -> str:
    """Answers its argument: a health check that a worker is consuming the queue (the one task whose result is
    kept: the caller waits for it)."""
    return f"pong:{value}"
