"""ChatSync: one chat's write queue. It keeps the chat's integrity, gathers bursts of edits into one patch, and on
a 409 integrity conflict re-reads the chat with `delta` and sends its change again."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lorekeeper_client.errors import NETWORK_ERRORS, SyncError, checked

if TYPE_CHECKING:
    from lorekeeper_client.http import SyncClient


@dataclass
class _Pending:
    operations: list[dict[str, Any]] = field(default_factory=list)
    timer: threading.Timer | None = None
    error: Exception | None = None


class ChatSync:
    """One chat's write queue. Writes hold the chat's lock, so they go out one at a time, in order."""

    def __init__(self, client: SyncClient, chat_id: int) -> None:
        self.client = client
        self.chat_id = chat_id
        self.integrity: str | None = None
        self.total_messages: int | None = None
        self._lock = threading.RLock()
        self._pending = _Pending()

    # ----------------------------------------------------------------------------------------------------- reads

    def refresh(self) -> dict[str, Any]:
        """Re-read the chat's state (integrity, length, metadata) with a one-message delta from its end."""
        response = self.client.request("GET", f"/chats/{self.chat_id}/delta", params={"from_index": 0, "limit": 1})
        body = checked(response)
        self.integrity, self.total_messages = body["integrity"], body["total_messages"]
        return body

    def read_all(self, page: int = 500) -> list[dict[str, Any]]:
        """Every message, paged with delta."""
        messages, start = [], 0
        while True:
            response = self.client.request(
                "GET", f"/chats/{self.chat_id}/delta", params={"from_index": start, "limit": page}
            )
            body = checked(response)
            messages += body["messages"]
            self.integrity, self.total_messages = body["integrity"], body["total_messages"]
            if not body["has_more"]:
                return messages
            start = body["next_index"]

    # ---------------------------------------------------------------------------------------------------- writes

    def append(self, messages: list[dict[str, Any]], *, generation_id: str | None = None) -> dict[str, Any]:
        """Append at the end; on a conflict (someone else wrote first) re-read and append again at the new end."""
        generation_id = generation_id or str(uuid.uuid4())
        return self._write("POST", "append", {"messages": messages, "generation_id": generation_id})

    def edit(self, index: int, path: str, value: Any) -> None:
        """Set a field of a message (`path` is a JSON pointer inside it, e.g. "mes" or "extra/ns/key"), debounced.

        On a conflict the pending patch is re-applied as it is, by index; to make sure it still lands on the same
        message after someone else inserted or removed messages, queue a `test` operation before it."""
        # `add` sets a member whether or not it exists yet (RFC 6902), so it serves for new and changed fields.
        self.queue({"op": "add", "path": f"/{index}/{path}", "value": value})

    def queue(self, operation: dict[str, Any]) -> None:
        """Add a JSON Patch operation to the pending patch; it goes out when the debounce window has passed."""
        with self._lock:
            self._pending.operations.append(operation)
            if self._pending.timer is not None:
                self._pending.timer.cancel()
            if self.client.debounce <= 0:
                self.flush()
                return
            self._pending.timer = threading.Timer(self.client.debounce, self._flush_in_background)
            self._pending.timer.daemon = True
            self._pending.timer.start()

    def flush(self) -> dict[str, Any] | None:
        """Send the pending patch now (one request for the whole burst).

        If it cannot be sent (network down, server error) the operations stay queued, in order, for the next
        flush; a patch the server refuses (4xx, e.g. a failed `test`) is dropped and its error raised."""
        with self._lock:
            if self._pending.timer is not None:
                self._pending.timer.cancel()
                self._pending.timer = None
            error, self._pending.error = self._pending.error, None
            if error is not None:
                raise error  # from a background flush; its operations are still queued
            operations, self._pending.operations = self._pending.operations, []
            if not operations:
                return None
            try:
                return self._write("POST", "patch", {"operations": operations})
            except SyncError as exc:
                if exc.status >= 500:
                    self._pending.operations[:0] = operations
                raise
            except NETWORK_ERRORS:
                self._pending.operations[:0] = operations
                raise

    def _flush_in_background(self) -> None:
        try:
            self.flush()
        except Exception as exc:  # kept for the next flush() to raise, not lost in the timer thread
            with self._lock:
                self._pending.error = exc

    def patch_metadata(self, merge_patch: dict[str, Any]) -> dict[str, Any]:
        return self._write(
            "PATCH",
            "metadata",
            merge_patch,
            content_type="application/merge-patch+json",
        )

    def set_data(self, index: int, namespace: str, values: dict[str, Any]) -> dict[str, Any]:
        return self._write("PATCH", f"messages/{index}/data/{namespace}", {"values": values})

    def _write(self, method: str, endpoint: str, body: Any, *, content_type: str = "application/json") -> dict:
        """The conflict loop: send with the integrity we know; on 409 integrity re-read and send again."""
        with self._lock:
            if self.integrity is None:
                self.refresh()
            content = json.dumps(body, ensure_ascii=False).encode()
            conflicts = 0
            for _ in range(self.client.max_conflict_retries + 1):
                response = self.client.request(
                    method,
                    f"/chats/{self.chat_id}/{endpoint}",
                    # A new key per attempt: after a conflict the request differs (a new If-Match).
                    idempotency_key=str(uuid.uuid4()),
                    content=content,
                    headers={"Content-Type": content_type, "If-Match": f'"{self.integrity}"'},
                )
                if response.status_code == 409 and response.json().get("error") == "integrity":
                    self.client.stats.conflicts += 1
                    conflicts += 1
                    # Back off a little (with jitter), so clients racing on one chat take turns instead of
                    # colliding again at once; then re-read and re-apply.
                    time.sleep(random.uniform(0, min(0.5, 0.01 * 2 ** min(conflicts, 6))))
                    self.refresh()
                    continue
                answer = checked(response)
                self.integrity = answer.get("integrity", self.integrity)
                self.total_messages = answer.get("total_messages", self.total_messages)
                return answer
            raise SyncError(409, f"still conflicting after {self.client.max_conflict_retries} re-reads")
