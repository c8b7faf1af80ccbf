from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A domain rule was broken. `status` is the HTTP status the API answers (4xx); see apps/common/api_errors.py."""

    def __init__(self, message: str, extra: dict[str, Any] | None = None, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        self.status = status
