"""The sync API's wiring: instances registered, listed, changed and removed; pull and push validated with errors
that name the change and field (and nothing stored then); status; another user's instances out of reach."""

import json
import uuid

import pytest

from apps.memories.models import Memory
from apps.memories.services.memories import memory_create
from apps.sync.models import FeedEntry, Instance

pytestmark = pytest.mark.django_db


def fact(character, uid=None, clock=None, **data):
    return {
        "type": "memory",
        "op": "create",
        "uid": str(uid or uuid.uuid4()),
        "clock": clock or {"laptop": 1},
        "data": {"kind": "fact", "content": "Mira keeps a lantern.", "character": str(character.uid), **data},
    }


def test_instances_are_registered_changed_listed_and_removed(api):
    created = api.post("/api/v1/sync/instances", {"key": "laptop", "name": "Laptop", "kind": "desktop"}, format="json")
    assert created.status_code == 201 and created.json()["name"] == "Laptop" and created.json()["cursor"] == 0
    again = api.post("/api/v1/sync/instances", {"key": "laptop", "priority": 3}, format="json")
    assert again.status_code == 200 and again.json()["priority"] == 3 and again.json()["name"] == "Laptop"
    changed = api.patch("/api/v1/sync/instances/laptop", {"name": "Old laptop"}, format="json")
    assert changed.json()["name"] == "Old laptop"
    assert [i["key"] for i in api.get("/api/v1/sync/instances").json()] == ["laptop"]
    assert api.delete("/api/v1/sync/instances/laptop").status_code == 204
    assert api.get("/api/v1/sync/instances/laptop").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"key": "server"}, "key"),
        ({"key": "has space"}, "key"),
        ({"key": "ok", "kind": "toaster"}, "kind"),
        ({"key": "ok", "priority": 5000}, "priority"),
    ],
)
def test_a_bad_instance_is_refused_naming_the_field(api, body, field):
    response = api.post("/api/v1/sync/instances", body, format="json")
    assert response.status_code == 400
    body = response.json()
    assert field in body or body.get("extra", {}).get("field") == field
    assert not Instance.objects.exists()


def test_another_users_instance_is_a_404(api, other_api):
    api.post("/api/v1/sync/instances", {"key": "laptop"}, format="json")
    assert other_api.get("/api/v1/sync/instances/laptop").status_code == 404
    assert other_api.delete("/api/v1/sync/instances/laptop").status_code == 404
    assert other_api.get("/api/v1/sync/status?instance=laptop").status_code == 404


def test_push_then_pull_through_the_api(api, character):
    uid = uuid.uuid4()
    pushed = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [fact(character, uid)]}, format="json")
    assert pushed.status_code == 200
    (result,) = pushed.json()["results"]
    assert result == {
        "index": 0,
        "type": "memory",
        "uid": str(uid),
        "result": "applied",
        "clock": {"laptop": 1},
        "reason": "",
        "winner": "",
        "item": None,
    }
    pulled = api.post("/api/v1/sync/pull", {"instance": "phone"}, format="json").json()
    memories = [i for i in pulled["items"] if i["type"] == "memory"]
    assert [m["uid"] for m in memories] == [str(uid)] and pulled["has_more"] is False
    assert pulled["cursor"] == pulled["head"] == max(i["seq"] for i in pulled["items"])


def test_a_bad_change_is_a_400_naming_it_and_nothing_is_stored(api, character):
    good = fact(character)
    bad = fact(character, kind="message")
    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [good, bad]}, format="json")
    assert response.status_code == 400
    assert "kind" in response.json()["changes"]["1"]["data"]
    assert not Memory.objects.exists() and not FeedEntry.objects.filter(type="memory").exists()


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"clock": {"laptop": -1}}, ("clock",)),
        ({"clock": {"phone": 1}}, ("clock",)),
        ({"uid": None}, ("uid",)),
        ({"op": "rename"}, ("op",)),
        ({"data": {"kind": "fact", "content": "No scope."}}, ("data", "character")),
        ({"data": {"kind": "daily", "content": "- A", "character": None, "chat": 1}}, ("data", "character")),
        ({"type": "settings", "op": "delete"}, ("op",)),
        ({"type": "settings", "op": "update", "data": {"document": {"ns": 3}}}, ("data", "document")),
        ({"data": {"kind": "fact", "content": "bad\u0000nul", "chat": 1}}, ("data", "content")),
        # Moments a day from year 1 or 9999 pass the years datetime holds in a person's time zone.
        (
            {"data": {"kind": "fact", "content": "x", "chat": 1, "occurred_at": "0001-01-01T05:00:00Z"}},
            ("data", "occurred_at"),
        ),
        ({"modified_at": "9999-12-31T10:00:00Z"}, ("modified_at",)),
        ({"data": {"kind": "fact", "content": "x", "chat": 1, "valid_from": 2**31}}, ("data", "valid_from")),
    ],
)
def test_each_malformed_change_names_its_field(api, character, change, path):
    body = fact(character) | change
    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [body]}, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["changes"]["0"]
    for key in path:
        error = error[key]
    assert error


@pytest.mark.parametrize("key", ["\x00", "lap\ud800"])
def test_a_clock_key_the_database_cannot_store_is_refused_naming_the_clock(api, character, key):
    """A clock is stored as jsonb, which holds no NUL and no lone surrogate: a 500 before."""
    body = fact(character) | {"clock": {"laptop": 1, key: 1}}
    response = api.generic(
        "POST", "/api/v1/sync/push", json.dumps({"instance": "laptop", "changes": [body]}),
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == 400, response.content[:300]
    assert response.json()["changes"]["0"]["clock"]
    assert not Memory.objects.exists()


def test_a_bad_instance_key_in_a_pull_names_the_instance(api):
    response = api.post("/api/v1/sync/pull", {"instance": "server"}, format="json")
    assert response.status_code == 400 and response.json()["extra"]["field"] == "instance"


def test_a_cursor_past_what_the_feed_counts_is_refused_naming_it(api):
    response = api.post("/api/v1/sync/pull", {"instance": "laptop", "cursor": 2**63}, format="json")
    assert response.status_code == 400 and "cursor" in response.json()
    assert api.post("/api/v1/sync/pull", {"instance": "laptop", "cursor": 2**63 - 1}, format="json").status_code == 200


def test_a_pull_registers_its_instance_and_status_shows_how_far_behind_each_is(api, character):
    api.post("/api/v1/sync/pull", {"instance": "laptop"}, format="json")
    api.post(
        "/api/v1/sync/push", {"instance": "phone", "changes": [fact(character, clock={"phone": 1})]}, format="json"
    )
    status = api.get("/api/v1/sync/status?instance=laptop").json()
    assert status["instance"]["instance"]["key"] == "laptop"
    assert status["instance"]["behind"] == 1
    # The phone never pulled: the character is new to it, and so (its cursor could not move past the character)
    # is its own memory.
    assert {row["instance"]["key"]: row["behind"] for row in status["instances"]} == {"laptop": 1, "phone": 2}
    assert status["objects"] >= 2 and status["tombstones"] == 0


def test_pull_limit_is_bounded(api):
    response = api.post("/api/v1/sync/pull", {"instance": "laptop", "limit": 999999}, format="json")
    assert response.status_code == 400 and "limit" in response.json()


def test_a_device_name_with_a_nul_character_is_refused_on_the_page_and_the_api(api, web, user):
    """PostgreSQL cannot store one: the devices page's form was a server error."""
    api.post("/api/v1/sync/instances", {"key": "laptop", "name": "Laptop", "kind": "desktop"}, format="json")
    page = web.post("/devices/laptop/", {"name": "a\x00b", "kind": "desktop", "priority": "0"}, follow=True)
    assert page.status_code == 200 and "cannot hold a NUL character" in page.content.decode()
    answer = api.patch("/api/v1/sync/instances/laptop", {"name": "a\x00b"}, format="json")
    assert answer.status_code == 400
    assert api.get("/api/v1/sync/instances/laptop").json()["name"] == "Laptop"


def test_the_devices_page_counts_what_is_kept_in_words_that_agree(web, api, user, character):
    def said() -> str:
        page = web.get("/devices/").content.decode()
        return " ".join(page.split('<p class="feed">')[1].split("</p>")[0].split())

    memory_create(user=user, character=character, kind="fact", content="Mira keeps a lantern.")
    kept = FeedEntry.objects.filter(user=user, deleted_at__isnull=True).count()
    things = "1 thing is" if kept == 1 else f"{kept} things are"
    assert f"{things} kept in sync so far; changes are numbered when a device first fetches them" in said()
    api.post("/api/v1/sync/instances", {"key": "laptop", "name": "Laptop", "kind": "desktop"}, format="json")
    assert api.post("/api/v1/sync/pull", {"instance": "laptop"}, format="json").status_code == 200
    assert "kept in sync so far; the latest change is number " in said()
