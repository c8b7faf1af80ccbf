from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A domain rule was broken. `status` is the HTTP status the API answers (4xx); see apps/common/api_errors.py."""

    def __init__(
        self, message: str, extra: dict[str, Any] | None = None, *, status: int = 400, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        self.status = status
        self.code = code

    def body(self) -> dict[str, Any]:
        """`{"message", "extra"}`; errors a client must tell apart by code (the sync API's 409s) answer
        `{"error": code, "message", ...extra}` instead."""
        if self.code:
            return {"error": self.code, "message": self.message, **self.extra}
        return {"message": self.message, "extra": self.extra}
