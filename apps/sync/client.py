"""A Python client for Lorekeeper's sync API (used by the tests and the benchmarks; usable by scripts).

It keeps the integrity of each chat it writes, serialises its writes per chat, gathers bursts of edits into one
patch (the debounce window, 1 s by default), sends every write with an Idempotency-Key (so a retry after a
network error or a 503 never applies twice), and on a 409 integrity conflict re-reads the chat's state with `delta`
and re-applies its pending change: the conflict loop Luker asks of its clients (docs/GLOSSARY.md).

    client = SyncClient("http://127.0.0.1:8720", token="lk_…")
    chat = client.chat(42)
    chat.append([{"name": "You", "is_user": True, "mes": "Hello"}])
    chat.edit(3, "mes", "A corrected line")      # debounced
    chat.flush()                                 # or wait for the window to pass
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

NETWORK_ERRORS = (httpx.TransportError,)


class SyncError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


@dataclass
class WriteStats:
    requests: int = 0
    conflicts: int = 0
    network_retries: int = 0
    unavailable_retries: int = 0
    bytes_sent: int = 0


@dataclass
class _Pending:
    operations: list[dict[str, Any]] = field(default_factory=list)
    timer: threading.Timer | None = None
    error: Exception | None = None


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
        body = self._check(response)
        self.integrity, self.total_messages = body["integrity"], body["total_messages"]
        return body

    def read_all(self, page: int = 500) -> list[dict[str, Any]]:
        """Every message, paged with delta."""
        messages, start = [], 0
        while True:
            response = self.client.request(
                "GET", f"/chats/{self.chat_id}/delta", params={"from_index": start, "limit": page}
            )
            body = self._check(response)
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
                answer = self._check(response)
                self.integrity = answer.get("integrity", self.integrity)
                self.total_messages = answer.get("total_messages", self.total_messages)
                return answer
            raise SyncError(409, f"still conflicting after {self.client.max_conflict_retries} re-reads")

    @staticmethod
    def _check(response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = response.text
            raise SyncError(response.status_code, body)
        return response.json()


# Fields an instance sends back for each type (the rest of a pulled item is the server's to say).
WRITABLE = {
    "memory": (
        "kind",
        "content",
        "data",
        "importance",
        "confidence",
        "time_scope",
        "valid_from",
        "valid_to",
        "status",
        "retired_reason",
        "occurred_at",
        "character",
        "chat",
        "superseded_by",
        "entities",
        "participating_instances",
        "date",
    ),
    "character": (
        "name",
        "description",
        "personality",
        "scenario",
        "first_mes",
        "mes_example",
        "system_prompt",
        "creator_notes",
        "tags",
        "card_data",
    ),
    "settings": ("document",),
}


@dataclass
class Cached:
    data: dict[str, Any]
    clock: dict[str, int]


class InstanceSync:
    """One instance's offline cache (entity-core's embodiment): it works on its local copies, queues what it
    changes, and syncs with `push` and `pull` (or `sync`, both). Each object's vector clock counts this
    instance's changes under its key; the server's answer gives the clock to keep, and the stored version when
    this one lost, which replaces the local copy. Deletions arrive as tombstones and remove local copies.

        laptop = client.instance("laptop", name="Laptop", kind="desktop")
        laptop.pull()                                   # the first one is a full pull
        uid = laptop.create("memory", {"kind": "fact", "content": "…", "character": character_uid})
        laptop.update("memory", uid, {"content": "…"})
        laptop.sync()
    """

    def __init__(self, client: SyncClient, key: str, *, now: Any = None, **registration: Any) -> None:
        """`now`: what tells the time of a change (default: this machine's clock)."""
        self.client = client
        self.key = key
        self.now = now or (lambda: datetime.now(UTC))
        self.items: dict[tuple[str, str], Cached] = {}
        self.queue: dict[tuple[str, str], dict[str, Any]] = {}
        self.cursor: int | None = None
        self.stats = {"pushed": 0, "pulled": 0, "push_bytes": 0, "pull_bytes": 0}
        body = {"key": key, **{k: v for k, v in registration.items() if v is not None}}
        _checked(client.request("POST", "/sync/instances", json=body))

    def _now(self) -> str:
        return self.now().isoformat()

    def _tick(self, clock: dict[str, int]) -> dict[str, int]:
        return {**clock, self.key: int(clock.get(self.key, 0)) + 1}

    def create(self, kind: str, data: dict[str, Any], *, uid: str | None = None) -> str:
        uid = uid or str(uuid.uuid4())
        self.items[(kind, uid)] = Cached(dict(data), {self.key: 1})
        self.queue[(kind, uid)] = {"op": "create", "modified_at": self._now()}
        return uid

    def update(self, kind: str, uid: str, changes: dict[str, Any], *, edit: bool = False) -> None:
        """Change the local copy; `edit`: a person's correction, which overwrites whatever the server holds."""
        item = self.items[(kind, uid)]
        item.data.update(changes)
        item.clock = self._tick(item.clock)
        queued = self.queue.get((kind, uid), {}).get("op")
        op = "create" if queued == "create" else ("edit" if edit or queued == "edit" else "update")
        self.queue[(kind, uid)] = {"op": op, "modified_at": self._now()}

    def delete(self, kind: str, uid: str) -> None:
        item = self.items.pop((kind, uid))
        self.queue[(kind, uid)] = {"op": "delete", "modified_at": self._now(), "clock": self._tick(item.clock)}

    def local(self, kind: str) -> dict[str, dict[str, Any]]:
        """The local copies of one type, by uid."""
        return {uid: item.data for (k, uid), item in self.items.items() if k == kind}

    def push(self, batch: int = 500) -> list[dict[str, Any]]:
        results = []
        pending = list(self.queue.items())
        for start in range(0, len(pending), batch):
            changes = []
            for (kind, uid), queued in pending[start : start + batch]:
                change = {"type": kind, "op": queued["op"], "uid": uid, "modified_at": queued["modified_at"]}
                if queued["op"] == "delete":
                    change["clock"] = queued["clock"]
                else:
                    item = self.items[(kind, uid)]
                    change["clock"] = item.clock
                    change["data"] = {k: v for k, v in item.data.items() if k in WRITABLE[kind]}
                changes.append(change)
            body = json.dumps({"instance": self.key, "changes": changes}).encode()
            self.stats["push_bytes"] += len(body)
            answer = _checked(
                self.client.request("POST", "/sync/push", content=body, headers={"Content-Type": "application/json"})
            )
            for result in answer["results"]:
                key = (result["type"], result["uid"])
                sent = changes[result["index"]]
                if sent.get("uid") and sent["uid"] != result["uid"]:
                    # Merged into another object (a second daily memory of the same day): that one replaces it.
                    self.items.pop((sent["type"], sent["uid"]), None)
                if result["item"] is not None:
                    self._adopt(result["item"])
                elif key in self.items:
                    self.items[key].clock = result["clock"]
            for (kind, uid), _ in pending[start : start + batch]:
                self.queue.pop((kind, uid), None)
            if self.cursor is not None:
                self.cursor = max(self.cursor, answer["cursor"])
            self.stats["pushed"] += len(changes)
            results += answer["results"]
        return results

    def pull(self, limit: int = 500) -> int:
        """Everything new on the feed, page by page; a local change still queued is left for the next push to
        settle. Returns how many items came."""
        count = 0
        while True:
            response = self.client.request(
                "POST", "/sync/pull", json={"instance": self.key, "cursor": self.cursor, "limit": limit}
            )
            self.stats["pull_bytes"] += len(response.content)
            page = _checked(response)
            for item in page["items"]:
                if (item["type"], item["uid"]) not in self.queue:
                    self._adopt(item)
            count += len(page["items"])
            self.cursor = page["cursor"]
            if not page["has_more"]:
                self.stats["pulled"] += count
                return count

    def sync(self) -> None:
        self.push()
        self.pull()

    def _adopt(self, item: dict[str, Any]) -> None:
        key = (item["type"], item["uid"])
        if item["deleted"]:
            self.items.pop(key, None)
        else:
            self.items[key] = Cached(dict(item["data"]), item["clock"])


def _checked(response: httpx.Response) -> dict[str, Any]:
    return ChatSync._check(response)
