"""apps/common/beside.py: work beside the caller's, on a connection of its own: outside a transaction, or inside one
for work that reads only what was committed before it (not inside a test case's transaction)."""

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from apps.common.beside import beside, beside_committed


def _where() -> tuple[int, int, bool]:
    """The thread, the server process of its connection, and whether it sees the user `seen`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    return threading.get_ident(), pid, User.objects.filter(username="seen").exists()


def _fails() -> None:
    raise ValueError("from the other thread")


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_work_runs_on_another_connection_and_sees_what_is_committed():
    User.objects.create_user(username="seen", password="x" * 12)
    here = _where()

    there = beside(_where).result(timeout=10)

    assert there[0] != here[0] and there[1] != here[1]
    assert there[2] is True
    with pytest.raises(ValueError, match="from the other thread"):
        beside(_fails).result(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_work_runs_here_and_sees_its_uncommitted_writes():
    with transaction.atomic():
        User.objects.create_user(username="seen", password="x" * 12)
        here = _where()

        assert beside(_where).result(timeout=10) == here
        with pytest.raises(ValueError, match="from the other thread"):
            beside(_fails).result()


@pytest.mark.django_db(transaction=True)
def test_committed_work_runs_beside_the_callers_transaction_and_sees_only_what_was_committed():
    User.objects.create_user(username="seen", password="x" * 12)
    with transaction.atomic():
        User.objects.filter(username="seen").delete()  # the caller's own write, not committed
        here = _where()

        there = beside_committed(_where).result(timeout=10)

        assert here[2] is False
        assert there[0] != here[0] and there[1] != here[1]
        assert there[2] is True  # the committed row, not the caller's uncommitted delete
    assert not User.objects.filter(username="seen").exists()


@pytest.mark.django_db
def test_inside_a_test_cases_transaction_committed_work_runs_here():
    """The test's own data is uncommitted: another connection would not see it."""
    User.objects.create_user(username="seen", password="x" * 12)
    here = _where()

    assert beside_committed(_where).result(timeout=10) == here
    with transaction.atomic():
        assert beside_committed(_where).result(timeout=10) == here


def _nested(depth: int) -> list[int]:
    """This thread, and the threads of the work it asked beside, `depth` deep."""
    inner = beside(_nested, depth - 1).result(timeout=10) if depth else []
    return [threading.get_ident(), *inner]


@pytest.mark.django_db(transaction=True)
def test_work_beside_asks_its_own_work_beside_in_its_own_thread_so_the_few_threads_never_wait_on_each_other():
    # Every thread holds work that asks for more: queued behind them, it would never start.
    from apps.common.beside import THREADS

    outer = [beside(_nested, 2) for _ in range(THREADS * 2)]

    for found in outer:
        threads = found.result(timeout=10)
        assert len(threads) == 3 and len(set(threads)) == 1
    assert threading.get_ident() not in {found.result()[0] for found in outer}
