"""Database work run beside the caller's, on a connection of its own: two independent queries of one request at once.

Outside a transaction only (`beside`). Inside one (an atomic block of the caller's, or a test's) another connection
would not see its writes, so the work runs in the caller's thread, at once, as if called directly. Work that reads
only what was committed before the caller's transaction began (a reply's recall search, inside the transaction that
prepares the reply, reads memories that transaction does not write) runs beside it there too (`beside_committed`),
except inside a test case's transaction, which holds the test's own data uncommitted. A thread's connection is
closed after the work when the settings keep none (CONN_MAX_AGE 0: under `make run` that gives it back to the pool),
else kept for the thread's next work, as a request would keep it.

Work already running beside runs what it asks beside in its own thread, at once: the threads are few, and work that
waited in one of them for a place among them could wait for ever once every thread held such work."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from django.db import close_old_connections, connection

T = TypeVar("T")
THREADS = 4
_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_inside = threading.local()  # `.yes` in this module's threads


def beside(function: Callable[..., T], /, *args, **kwargs) -> Future[T]:
    """`function(*args, **kwargs)` in a thread of this process's few, its result (or error) from the answer's
    `.result()`."""
    if connection.in_atomic_block or _beside_already():
        return _here(function, args, kwargs)
    return _threads().submit(_on_own_connection, function, args, kwargs)


def beside_committed(function: Callable[..., T], /, *args, **kwargs) -> Future[T]:
    """As `beside`, also inside the caller's transaction, for work that needs none of the caller's uncommitted
    writes; in the caller's thread inside a test case's transaction (Django marks its atomic blocks, and tells
    them apart by the same mark for `durable` blocks)."""
    if _beside_already() or any(getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
        return _here(function, args, kwargs)
    return _threads().submit(_on_own_connection, function, args, kwargs)


def _here(function: Callable[..., T], args: tuple, kwargs: dict) -> Future[T]:
    done: Future[T] = Future()
    try:
        done.set_result(function(*args, **kwargs))
    except Exception as error:
        done.set_exception(error)
    return done


def _beside_already() -> bool:
    return getattr(_inside, "yes", False)


def _on_own_connection(function: Callable[..., T], args: tuple, kwargs: dict) -> T:
    close_old_connections()  # as a request starts: a connection past its age or broken is not reused
    _inside.yes = True
    try:
        return function(*args, **kwargs)
    finally:
        _inside.yes = False
        close_old_connections()


def _threads() -> ThreadPoolExecutor:
    global _executor, _executor_pid
    if _executor is None or _executor_pid != os.getpid():  # a forked worker process starts threads of its own
        _executor, _executor_pid = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="beside"), os.getpid()
    return _executor
