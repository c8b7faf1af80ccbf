"""InstanceSync: an offline instance's cache of the account's memories, characters, lorebooks and settings document,
synced with push and pull (apps/sync/services/push/, apps/sync/services/feed.py)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lorekeeper_client.errors import checked

if TYPE_CHECKING:
    from lorekeeper_client.http import SyncClient

# Fields an instance sends back for each type (the rest of a pulled item is the server's to say): the fields of
# the server's DATA_SERIALIZERS (apps/sync/records.py), which tests/sync/test_client_fields.py holds them to.
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
        "extra_books",
    ),
    "settings": ("document",),
    "lorebook": ("name", "scope", "book"),
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
        checked(client.request("POST", "/sync/instances", json=body))

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
        """Send the queued changes, `batch` to a request; the answers' clocks, and the stored versions of what
        lost, replace the local copies'. Returns the answers."""
        results = []
        pending = list(self.queue.items())
        for start in range(0, len(pending), batch):
            results += self._push_batch(pending[start : start + batch])
        return results

    def _change(self, kind: str, uid: str, queued: dict[str, Any]) -> dict[str, Any]:
        """A queued change as the push sends it (the fields of ChangeSerializer in apps/sync/apis/instances.py)."""
        change = {"type": kind, "op": queued["op"], "uid": uid, "modified_at": queued["modified_at"]}
        if queued["op"] == "delete":
            change["clock"] = queued["clock"]
        else:
            item = self.items[(kind, uid)]
            change["clock"] = item.clock
            change["data"] = {k: v for k, v in item.data.items() if k in WRITABLE[kind]}
        return change

    def _push_batch(self, pending: list[tuple[tuple[str, str], dict[str, Any]]]) -> list[dict[str, Any]]:
        changes = [self._change(kind, uid, queued) for (kind, uid), queued in pending]
        body = json.dumps({"instance": self.key, "changes": changes}).encode()
        self.stats["push_bytes"] += len(body)
        answer = checked(
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
        for (kind, uid), _ in pending:
            self.queue.pop((kind, uid), None)
        if self.cursor is not None:
            self.cursor = max(self.cursor, answer["cursor"])
        self.stats["pushed"] += len(changes)
        return answer["results"]

    def pull(self, limit: int = 500) -> int:
        """Everything new on the feed, page by page; a local change still queued is left for the next push to
        settle. Returns how many items came."""
        count = 0
        while True:
            response = self.client.request(
                "POST", "/sync/pull", json={"instance": self.key, "cursor": self.cursor, "limit": limit}
            )
            self.stats["pull_bytes"] += len(response.content)
            page = checked(response)
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
