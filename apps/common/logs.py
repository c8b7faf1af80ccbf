"""Logging filters."""

from __future__ import annotations

import logging

from apps.common.views import database_down


class DatabaseUnavailable(logging.Filter):
    """A request that failed because the database was unreachable was answered 503 with Retry-After
    (apps/common/views.py): one line naming the cause, not a whole traceback for every request of an outage under
    load."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if database_down(exc):
            cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            record.msg, record.args = "%s (database unavailable: %s)", (record.getMessage(), cause)
            record.exc_info = record.exc_text = None
        return True
