"""Three instances working offline against their own caches — creating, editing, deleting and re-creating
memories, while a person also edits on the server — then syncing through the API in random orders: every
instance ends with the server's state, nothing deleted comes back, and every surviving memory holds its latest
write (last write wins: the steps are seconds apart, so the latest write is also the causally last where one
descends from another)."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from apps.memories.models import Memory
from apps.sync.clocks import tick
from apps.sync.models import FeedEntry
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

KEYS = ("laptop", "phone", "companion")
PRIORITIES = {"laptop": 0, "phone": 2, "companion": 1}
users = itertools.count()


@dataclass
class Local:
    content: str
    clock: dict[str, int]


@dataclass
class Instance:
    """A client as a real one would be written: a local cache, a queue of changes, a cursor."""

    key: str
    api: APIClient
    character: str
    items: dict[str, Local] = field(default_factory=dict)
    queue: dict[str, dict] = field(default_factory=dict)  # uid → the change to push (the latest per uid)
    cursor: int | None = None

    def create(self, content: str, when) -> str:
        uid = str(uuid.uuid4())
        self.items[uid] = Local(content, {self.key: 1})
        self.queue[uid] = {"op": "create", "when": when}
        return uid

    def edit(self, uid: str, content: str, when) -> None:
        item = self.items[uid]
        item.content, item.clock = content, tick(item.clock, self.key)
        op = "create" if self.queue.get(uid, {}).get("op") == "create" else "update"
        self.queue[uid] = {"op": op, "when": when}

    def delete(self, uid: str, when) -> None:
        item = self.items.pop(uid)
        self.queue[uid] = {"op": "delete", "when": when, "clock": tick(item.clock, self.key)}

    def push(self) -> None:
        changes = []
        for uid, queued in self.queue.items():
            if queued["op"] == "delete":
                changes.append({"type": "memory", "op": "delete", "uid": uid, "clock": queued["clock"]})
                continue
            item = self.items[uid]
            data = {"content": item.content}
            if queued["op"] == "create":
                data |= {"kind": "fact", "character": self.character}
            changes.append({"type": "memory", "op": queued["op"], "uid": uid, "clock": item.clock, "data": data})
        for change, queued in zip(changes, self.queue.values(), strict=True):
            change["modified_at"] = queued["when"].isoformat()
        response = self.api.post("/api/v1/sync/push", {"instance": self.key, "changes": changes}, format="json")
        assert response.status_code == 200, response.json()
        body = response.json()
        self.queue.clear()
        for result in body["results"]:
            if result["item"] is not None:
                self.adopt(result["item"])
            elif result["uid"] in self.items:
                self.items[result["uid"]].clock = result["clock"]
        if self.cursor is not None:
            self.cursor = max(self.cursor, body["cursor"])

    def pull(self) -> None:
        while True:
            body = {"instance": self.key, "cursor": self.cursor, "limit": 7}
            response = self.api.post("/api/v1/sync/pull", body, format="json")
            assert response.status_code == 200, response.json()
            page = response.json()
            for item in page["items"]:
                if item["type"] == "memory" and item["uid"] not in self.queue:
                    self.adopt(item)  # a change still queued here is settled by the next push
            self.cursor = page["cursor"]
            if not page["has_more"]:
                return

    def adopt(self, item: dict) -> None:
        if item["deleted"] or item["data"]["status"] != "active":
            self.items.pop(item["uid"], None)
        else:
            self.items[item["uid"]] = Local(item["data"]["content"], item["clock"])


step = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(KEYS)),
    st.tuples(st.just("edit"), st.sampled_from(KEYS), st.integers(0, 20)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.integers(0, 20)),
    st.tuples(st.just("recreate"), st.sampled_from(KEYS), st.integers(0, 20)),
    st.tuples(st.just("push"), st.sampled_from(KEYS)),
    st.tuples(st.just("pull"), st.sampled_from(KEYS)),
    st.tuples(st.just("web_edit"), st.integers(0, 20)),
)


def live_on_server(user) -> dict[str, tuple[str, dict]]:
    tombstones = set(FeedEntry.objects.filter(user=user, deleted_at__isnull=False).values_list("uid", flat=True))
    return {
        str(m.uid): (m.content, m.clock)
        for m in Memory.objects.filter(user=user, status="active").exclude(kind="message")
        if m.uid not in tombstones
    }


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(steps=st.lists(step, max_size=40), final_order=st.permutations(KEYS))
def test_three_instances_converge_whatever_the_interleaving(steps, final_order):
    user = get_user_model().objects.create_user(username=f"sim{next(users)}")
    character = CharacterFactory(user=user, name="Mira")
    start = timezone.now() - timedelta(days=1)
    writes: dict[str, list[tuple]] = {}  # uid → (when, content) of every write
    for number in range(3):  # memories every instance has from the start: edits of them meet
        made = Memory.objects.create(
            user=user, character=character, kind="fact", content=f"shared {number}", changed_at=start
        )
        writes[str(made.uid)] = [(start, made.content)]
    instances = {}
    for key in KEYS:
        api = APIClient()
        api.force_authenticate(user)
        api.post("/api/v1/sync/instances", {"key": key, "priority": PRIORITIES[key]}, format="json")
        instances[key] = Instance(key, api, str(character.uid))
        instances[key].pull()

    deleted: set[str] = set()
    counter = itertools.count()
    for number, action in enumerate(steps):
        when = start + timedelta(seconds=2 * number + 2)  # a second or more apart: no ties
        kind, rest = action[0], action[1:]
        content = f"memory text {next(counter)}"
        if kind == "create":
            uid = instances[rest[0]].create(content, when)
            writes.setdefault(uid, []).append((when, content))
        elif kind in ("edit", "delete", "recreate"):
            instance = instances[rest[0]]
            if not instance.items:
                continue
            uid = sorted(instance.items)[rest[1] % len(instance.items)]
            if kind == "edit":
                instance.edit(uid, content, when)
                writes.setdefault(uid, []).append((when, content))
            else:
                old = instance.items[uid].content
                instance.delete(uid, when)
                deleted.add(uid)
                if kind == "recreate":
                    new = instance.create(old, when)
                    writes.setdefault(new, []).append((when, old))
        elif kind == "push":
            instances[rest[0]].push()
        elif kind == "pull":
            instances[rest[0]].pull()
        else:  # a person edits on the server (a bulk write: the trigger counts it as the server's)
            live = sorted(live_on_server(user))
            if not live:
                continue
            uid = live[rest[0] % len(live)]
            Memory.objects.filter(uid=uid).update(content=content, changed_at=when)
            writes.setdefault(uid, []).append((when, content))

    for _ in range(2):  # the final sync: everyone pushes and pulls, twice round
        for key in final_order:
            instances[key].push()
            instances[key].pull()

    server = live_on_server(user)
    for instance in instances.values():
        assert {uid: (i.content, i.clock) for uid, i in instance.items.items()} == server, instance.key
    assert not deleted & server.keys(), "a deleted memory came back"
    for uid, (content, _) in server.items():
        assert content == max(writes[uid])[1], "a surviving memory lost its latest write"
    assert {uid for uid in writes if uid not in deleted} <= server.keys(), "a memory nobody deleted is missing"
