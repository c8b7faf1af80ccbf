"""Three instances working offline against their own caches — creating, editing, deleting and re-creating
memories, while a person also edits on the server — then syncing through the API in random orders: every
instance ends with the server's state, nothing deleted comes back, and every surviving memory holds its latest
write (last write wins: the steps are seconds apart, so the latest write is also the causally last where one
descends from another)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.wsgi import get_wsgi_application
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lorekeeper_client.http import SyncClient

from apps.accounts.services import api_token_create
from apps.memories.models import Memory
from apps.sync.models import FeedEntry
from tests.chats.factories import CharacterFactory

# Slow (`make test-all`): 60 random interleavings, each a few dozen requests; tests/chats/test_write_model.py
# checks the single-chat model on every `make test`.
pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.usefixtures("in_process_requests")]

KEYS = ("laptop", "phone", "companion")
PRIORITIES = {"laptop": 0, "phone": 2, "companion": 1}
users = itertools.count()
BASE = "http://testserver/api/v1"


class Clock:
    """The simulation's time: a step is two seconds after the one before."""

    def __init__(self, start) -> None:
        self.value = start

    def __call__(self):
        return self.value


def client_for(user) -> SyncClient:
    """The package's client, talking to this process's Django through WSGI (the test's own transaction)."""
    _, token = api_token_create(user=user, name="simulation")
    transport = httpx.WSGITransport(app=get_wsgi_application())
    return SyncClient("http://testserver", token=token, http=httpx.Client(transport=transport, base_url=BASE))


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
    mira = str(character.uid)
    start = timezone.now() - timedelta(days=1)
    writes: dict[str, list[tuple]] = {}  # uid → (when, content) of every write
    for number in range(3):  # memories every instance has from the start: edits of them meet
        made = Memory.objects.create(
            user=user, character=character, kind="fact", content=f"shared {number}", changed_at=start
        )
        writes[str(made.uid)] = [(start, made.content)]
    clock = Clock(start)
    client = client_for(user)
    instances = {key: client.instance(key, priority=PRIORITIES[key], now=clock) for key in KEYS}
    for instance in instances.values():
        instance.pull(limit=7)

    deleted: set[str] = set()
    counter = itertools.count()
    for number, action in enumerate(steps):
        when = clock.value = start + timedelta(seconds=2 * number + 2)  # a second or more apart: no ties
        kind, rest = action[0], action[1:]
        content = f"memory text {next(counter)}"
        if kind == "create":
            uid = instances[rest[0]].create("memory", {"kind": "fact", "content": content, "character": mira})
            writes.setdefault(uid, []).append((when, content))
        elif kind in ("edit", "delete", "recreate"):
            instance = instances[rest[0]]
            live = sorted(instance.local("memory"))
            if not live:
                continue
            uid = live[rest[1] % len(live)]
            if kind == "edit":
                instance.update("memory", uid, {"content": content})
                writes.setdefault(uid, []).append((when, content))
            else:
                old = instance.local("memory")[uid]["content"]
                instance.delete("memory", uid)
                deleted.add(uid)
                if kind == "recreate":
                    new = instance.create("memory", {"kind": "fact", "content": old, "character": mira})
                    writes.setdefault(new, []).append((when, old))
        elif kind == "push":
            instances[rest[0]].push()
        elif kind == "pull":
            instances[rest[0]].pull(limit=7)
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
        local = {uid: (i.data["content"], i.clock) for (k, uid), i in instance.items.items() if k == "memory"}
        assert local == server, instance.key
    assert not deleted & server.keys(), "a deleted memory came back"
    for uid, (content, _) in server.items():
        assert content == max(writes[uid])[1], "a surviving memory lost its latest write"
    assert {uid for uid in writes if uid not in deleted} <= server.keys(), "a memory nobody deleted is missing"


def test_a_client_whose_daily_merged_into_the_days_keeps_one_copy(user):
    character = CharacterFactory(user=user, name="Mira")
    laptop = client_for(user).instance("laptop")
    laptop.pull()
    day = {"kind": "daily", "character": str(character.uid), "date": "2026-11-20"}
    first = laptop.create("memory", {**day, "content": "- Met Corvin [chat:1]"})
    laptop.push()
    laptop.create("memory", {**day, "content": "- Found the key [chat:2]"})
    laptop.push()
    dailies = laptop.local("memory")
    assert list(dailies) == [first]
    assert dailies[first]["content"] == "- Met Corvin [chat:1] [via:laptop]\n- Found the key [chat:2] [via:laptop]"
