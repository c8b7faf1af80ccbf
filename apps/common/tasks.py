"""Tasks every app shares, and the one way to send a task."""

from __future__ import annotations

import atexit
import functools
import logging
import os
import queue
import threading
from collections.abc import Callable

from celery import current_app, shared_task
from celery.signals import task_postrun, task_prerun
from django.db import DatabaseError, close_old_connections, connection, transaction

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


class _Sender:
    """The thread a process runs its commit hooks from (`on_commit_once`'s, which send tasks), one after another in
    the order they were asked for. A send is a round trip to the broker (about a millisecond; every write of a chat
    wakes two tasks), which the request that wrote no longer waits for. A hook that has not run when the process
    ends is lost, as a send the broker refused is: the periodic sweep sends what each app's outbox still holds."""

    def __init__(self) -> None:
        self.pid = 0
        self.lock = threading.Lock()
        self.waiting: queue.Queue[Callable[[], object]] = queue.Queue()
        self.pending = _Pending()

    def put(self, hook: Callable[[], object]) -> None:
        if self.pid != os.getpid():  # the first hook of this process (a forked worker starts its own thread)
            with self.lock:
                if self.pid != os.getpid():
                    self.waiting, self.pending = queue.Queue(), _Pending()
                    threading.Thread(
                        target=self._run, args=(self.waiting, self.pending), name="task-sender", daemon=True
                    ).start()
                    self.pid = os.getpid()
        self.pending.add()
        self.waiting.put(hook)

    @staticmethod
    def _run(waiting: queue.Queue, pending: _Pending) -> None:
        while True:
            hook = waiting.get()
            try:
                hook()
            except Exception:  # noqa: BLE001 — a hook's failure must not end the thread every later hook needs
                log.exception("a commit hook failed")
            finally:
                pending.done()

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait (at most `timeout` seconds) until every hook asked for so far has run; whether they have."""
        return self.pid != os.getpid() or self.pending.wait(timeout)


class _Pending:
    """How many of a process's hooks were asked for and have not run yet, and a wait until none is left (a queue's
    own `join` has no time limit)."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def add(self) -> None:
        with self.changed:
            self.count += 1

    def done(self) -> None:
        with self.changed:
            self.count -= 1
            if not self.count:
                self.changed.notify_all()

    def wait(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: not self.count, timeout)


_SENDER = _Sender()
atexit.register(_SENDER.drain, 5.0)  # a worker stopping sends what its last requests asked for


def hooks_drain(timeout: float = 10.0) -> bool:
    """Wait until the commit hooks asked for so far have run (their tasks are with the broker): for a caller that
    reads the broker next (a test), or stops it."""
    return _SENDER.drain(timeout)


class _Once:
    """`function(*args)` as a commit hook, equal to another hook of the same function and arguments. It runs on the
    process's sender thread (`_Sender`), off the path of the request that committed; in place where tasks run in
    place (the tests' eager mode), since the task itself runs then."""

    def __init__(self, function: Callable[..., object], args: tuple) -> None:
        self.function, self.args = function, args

    def __call__(self) -> None:
        if current_app.conf.task_always_eager:
            self.function(*self.args)
        else:
            _SENDER.put(functools.partial(self.function, *self.args))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Once) and (other.function, other.args) == (self.function, self.args)

    __hash__ = None  # equal by value, and mutable: not a dict key


def on_commit_once(function: Callable[..., object], *args) -> None:
    """`function(*args)` once the current transaction commits (at once outside one), and once only however often
    the transaction asks: a reply's preparation writes its chat several times, and each write wakes the chat's
    indexing and extraction, whose tasks each cost a round trip to the broker. `function` sends a task (nothing
    that needs the caller's thread or connection): it runs on the process's sender thread, see `_Once`. A hook
    dropped with a savepoint rolled back is asked for again by the next write (Django's own list of the
    transaction's hooks is what is looked in)."""
    hook = _Once(function, args)
    within = _own_transaction()
    if within is not None and any(
        registered == hook and within <= savepoints for savepoints, registered, _ in connection.run_on_commit
    ):
        return
    transaction.on_commit(hook)


def _own_transaction() -> set | None:
    """The savepoints that mark a hook as asked for by the caller's own transaction: its outermost atomic block
    that is not a test case's (empty: the transaction itself, as in production). None: no such block, or one
    without a savepoint, where nothing is left out. Inside a test case's transaction, hooks that the test's setup
    asked for are never run; the test's own request must still ask for its own."""
    for position, block in enumerate(connection.atomic_blocks):
        if not getattr(block, "_from_testcase", False):
            if position == 0:
                return set()
            savepoint = connection.savepoint_ids[position - 1]
            return {savepoint} if savepoint is not None else None
    return None


@shared_task(name="common.ping", ignore_result=False, soft_time_limit=10, time_limit=20)
def ping(value: str) -> str:
    """Answers its argument: a health check that a worker is consuming the queue (the one task whose result is
    kept: the caller waits for it)."""
    return f"pong:{value}"


# A worker's tasks use its database connections as requests use a web process's: kept while CONN_MAX_AGE allows and
# checked before reuse (CONN_HEALTH_CHECKS), closed when broken or left inside a transaction. Celery's own closing of
# every connection at every task is turned off (CELERY_DB_REUSE_MAX, config/settings/base.py). Eager tasks (the
# tests') run inside their caller's transaction and connection, which are left alone.


@task_prerun.connect(dispatch_uid="common.connections_checked")
def _connections_checked(task=None, **kwargs) -> None:
    if not getattr(task.request, "is_eager", False):
        close_old_connections()


@task_postrun.connect(dispatch_uid="common.connections_kept")
def _connections_kept(task=None, **kwargs) -> None:
    if getattr(task.request, "is_eager", False):
        return
    if connection.connection is not None and not connection.in_atomic_block:
        # A session lock the task took and could not give back (its unlock failed in an aborted transaction) went
        # with the connection when each task closed it; a kept connection gives it back here. Before the check
        # below, which marks the connection for a health check at its next statement.
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock_all()")
        except DatabaseError:
            connection.close()
    close_old_connections()
