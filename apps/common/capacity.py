"""Whether this web process is full, for the web worker's accepting of connections (apps/common/worker.py).

A part of the application that holds long-lived work in a process, and refuses more past a cap (replies streaming:
apps/generation/services/stream.py), adds a check saying whether the process is at that cap. While one says so, the
worker leaves new connections to the other workers of the server a moment before it takes one itself, so that a
request is refused as busy only when every worker is full, not because the kernel gave it to the one that is.

Plain Python with no Django: the worker reads it before the application is loaded, and a test's bare application
(tests/common/loop_app.py) adds checks of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)
_checks: list[Callable[[], bool]] = []


def full_check_add(check: Callable[[], bool]) -> None:
    """`check()` says whether this process is at a cap of its own; it is called for every new connection, so it
    counts what it already holds and reads nothing."""
    if check not in _checks:
        _checks.append(check)


def process_full() -> bool:
    """Whether a check says this process is full. A check that fails counts as not full (the application's own cap
    still answers the request), logged."""
    for check in _checks:
        try:
            if check():
                return True
        except Exception:
            log.exception("the capacity check %r failed", check)
    return False
