"""What the client raises: `SyncError` for an answer that is an error (after the retries), and the network errors
(`NETWORK_ERRORS`) it retries, let through once its retries are spent."""

from __future__ import annotations

from typing import Any

import httpx

NETWORK_ERRORS = (httpx.TransportError,)


class SyncError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


def checked(response: httpx.Response) -> dict[str, Any]:
    """The answer's JSON body; a SyncError when the answer is an error (4xx or 5xx)."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        raise SyncError(response.status_code, body)
    return response.json()
