"""SyncClient: the connection to Lorekeeper's API, the retries of a request, and the handles it gives out (a chat's
write queue, an offline instance)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from lorekeeper_client.chat import ChatSync
from lorekeeper_client.errors import NETWORK_ERRORS
from lorekeeper_client.instance import InstanceSync


@dataclass
class WriteStats:
    requests: int = 0
    conflicts: int = 0
    network_retries: int = 0
    unavailable_retries: int = 0
    bytes_sent: int = 0


class SyncClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        debounce: float = 1.0,
        max_conflict_retries: int = 100,
        network_retries: int = 3,
        unavailable_retries: int = 10,
        retry_after_max: float = 30.0,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.http = http or httpx.Client(base_url=base_url.rstrip("/") + "/api/v1", timeout=timeout)
        self.http.headers["Authorization"] = f"Bearer {token}"
        self.debounce = debounce
        self.max_conflict_retries = max_conflict_retries
        self.network_retries = network_retries
        self.unavailable_retries = unavailable_retries
        self.retry_after_max = retry_after_max
        self.stats = WriteStats()
        self._chats: dict[int, ChatSync] = {}
        self._lock = threading.Lock()

    def instance(self, key: str, **registration: Any) -> InstanceSync:
        """An offline instance of this account (registered now): see InstanceSync."""
        return InstanceSync(self, key, **registration)

    def chat(self, chat_id: int) -> ChatSync:
        with self._lock:
            if chat_id not in self._chats:
                self._chats[chat_id] = ChatSync(self, chat_id)
            return self._chats[chat_id]

    def close(self) -> None:
        for chat in list(self._chats.values()):
            chat.flush()
        self.http.close()

    def request(self, method: str, path: str, *, idempotency_key: str | None = None, **kwargs) -> httpx.Response:
        """One request. On a network error, a 503 (the server's database is restarting) or a 429 (the token's rate
        is used up), the very same request (same Idempotency-Key) is sent again: at once after a network error,
        after the wait Retry-After asks for (at most `retry_after_max` seconds) otherwise."""
        headers = dict(kwargs.pop("headers", {}))
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        network_errors = unavailable = 0
        while True:
            try:
                request = self.http.build_request(method, path, headers=headers, **kwargs)
                self.stats.requests += 1
                self.stats.bytes_sent += len(request.content or b"")
                response = self.http.send(request)
            except NETWORK_ERRORS:
                if network_errors == self.network_retries:
                    raise
                network_errors += 1
                self.stats.network_retries += 1
                continue
            if response.status_code not in (429, 503) or unavailable == self.unavailable_retries:
                return response
            unavailable += 1
            self.stats.unavailable_retries += 1
            time.sleep(self._retry_after(response))

    def _retry_after(self, response: httpx.Response) -> float:
        try:
            wait = float(response.headers.get("Retry-After", "1"))
        except ValueError:  # an HTTP date: not something this server sends
            wait = 1.0
        return max(0.0, min(wait, self.retry_after_max))
