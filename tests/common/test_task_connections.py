"""A worker's tasks keep their database connection as a web process's requests do, and leave no session lock."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from apps.common import tasks
from config.celery import app as celery_app
from tests.worker import celery_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _worker_backends() -> set[int]:
    """The backends of the test database other than the test's own that ended their last task (its last statement
    the one the end of every task runs)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # pg_stat_activity is read once a transaction otherwise
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND state = 'idle' AND query = 'SELECT pg_advisory_unlock_all()'"
        )
        return {pid for (pid,) in cursor.fetchall()}


def _run(name: str, *args) -> None:
    """`name(*args)` in the worker, then a ping through the same queue: one process takes them in order."""
    celery_app.send_task(name, list(args))
    assert celery_app.send_task("common.ping", ["done"]).get(timeout=60) == "pong:done"


def test_a_workers_tasks_reuse_one_database_connection(broker):
    # Celery's own fix-up closed every connection after each task: each task started a PostgreSQL backend.
    with celery_worker(broker, LOREKEEPER_TEST_CONN_MAX_AGE="60"):  # as in a deployment (the tests' own is 0)
        _run("memories.embed_pending", 0)  # reads the database (no such user: nothing to embed)
        # Polled: ping's result is stored before its task ends, and the end's own statements may still be running.
        first = wait_for(_worker_backends, timeout=10, what="the worker's connection idle after its task")
        assert len(first) == 1
        for _ in range(3):
            _run("memories.embed_pending", 0)
        wait_for(lambda: _worker_backends() == first, timeout=10, what="the same connection idle after three tasks")


class _Task:
    class request:
        is_eager = False


def test_a_session_lock_a_task_left_is_given_back_at_its_end(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)  # kept, as in a worker (the tests' is 0)
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(4242, 7)")
    kept = connection.connection
    params = connection.get_connection_params()

    def free() -> bool:
        with psycopg.connect(**params, autocommit=True) as other:
            return other.execute("SELECT pg_try_advisory_lock(4242, 7)").fetchone()[0]

    assert not free()
    tasks._connections_kept(task=_Task())
    assert connection.connection is kept, "the connection was closed, not kept"
    assert free()
