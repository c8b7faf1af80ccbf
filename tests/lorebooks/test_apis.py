"""Lorebooks over the API: a World Info file imported whole or refused whole with the entry and field named,
exported as it came, scoped to its owner."""

from __future__ import annotations

import io
import json

import pytest

from apps.lorebooks.models import Lorebook, LorebookEntry

pytestmark = pytest.mark.django_db

WORLD = {
    "name": "Harbour",
    "extensions": {"custom": 1},
    "entries": {
        "0": {"uid": 0, "key": ["lantern"], "content": "The lantern burns whale oil.", "order": 100,
              "position": 1, "customField": "kept"},
        "7": {"uid": 7, "key": ["/gull(s)?/i"], "keysecondary": ["ship"], "selectiveLogic": 3,
              "content": "The Gull is Hale's ship.", "position": 4, "depth": 2, "role": 1},
    },
}  # fmt: skip


def _import(api, data=WORLD, **extra):
    return api.post("/api/v1/lorebooks/", {"name": "Harbour", "data": data, **extra}, format="json")


def test_a_world_info_file_is_imported_and_exported_with_every_key(api):
    response = _import(api)
    assert response.status_code == 201, response.json()
    assert response.json()["entry_count"] == 2 and response.json()["scope"] == "linked"
    exported = api.get(f"/api/v1/lorebooks/{response.json()['id']}/export")
    assert exported.status_code == 200 and "Harbour.json" in exported["Content-Disposition"]
    body = exported.json()
    assert body["extensions"] == {"custom": 1} and body["name"] == "Harbour"
    assert set(body["entries"]) == {"0", "7"}
    first = body["entries"]["0"]
    assert first["customField"] == "kept" and first["content"] == "The lantern burns whale oil."
    assert "selectiveLogic" not in first and "probability" not in first  # kept as given: absent stays absent
    # exported again, it imports to the same entries
    again = api.post("/api/v1/lorebooks/", {"name": "Copy", "data": body}, format="json")
    copy = Lorebook.objects.get(id=again.json()["id"])
    assert {e.uid: e.data for e in copy.entries.all()} == {int(k): v for k, v in body["entries"].items()}


def test_a_file_upload_takes_its_name_from_the_file(api):
    upload = io.BytesIO(json.dumps(WORLD).encode())
    upload.name = "Sea Lore.json"
    response = api.post("/api/v1/lorebooks/", {"file": upload}, format="multipart")
    assert response.status_code == 201 and response.json()["name"] == "Sea Lore"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"key": "lantern"}, "key"),
        ({"key": ["/(unclosed/"]}, "key"),
        ({"position": 9}, "position"),
        ({"selectiveLogic": 5}, "selectiveLogic"),
        ({"role": "narrator"}, "role"),
        ({"probability": "often"}, "probability"),
        ({"order": True}, "order"),
        ({"constant": "yes"}, "constant"),
        ({"scanDepth": 5000}, "scanDepth"),
        ({"triggers": ["sometimes"]}, "triggers"),
        ({"content": 12}, "content"),
    ],
)
def test_a_bad_entry_refuses_the_file_naming_entry_and_field_and_stores_nothing(api, entry, field):
    data = {"entries": {"0": {"uid": 0, "key": ["fine"], "content": "ok"}, "3": {"uid": 3, "content": "x", **entry}}}
    response = _import(api, data)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["extra"] == {"entry": "entry 3", "field": field}, body
    assert "entry 3" in body["message"] and field in body["message"]
    assert not Lorebook.objects.exists() and not LorebookEntry.objects.exists()


@pytest.mark.parametrize("uid", ["9" * 5000, "-" + "9" * 5000, "2147483648"])
def test_an_entry_uid_past_the_range_as_text_is_refused_naming_it(api, uid):
    """A uid of digits is read as the number; past 4,300 digits int() reads none (it raised: a 500)."""
    for data in ({"entries": {"3": {"uid": uid, "key": ["k"], "content": "c"}}},
                 {"entries": {uid: {"key": ["k"], "content": "c"}}}):  # fmt: skip
        response = _import(api, data)
        assert response.status_code == 400, response.content[:300]
        assert response.json()["extra"]["field"] == "uid"
    assert not Lorebook.objects.exists()


def test_a_book_of_too_many_entries_is_refused(api):
    data = {"entries": {str(n): {"uid": n, "key": ["k"], "content": "c"} for n in range(10_001)}}
    response = _import(api, data)
    assert response.status_code == 400 and response.json()["extra"] == {"field": "entries"}
    assert not Lorebook.objects.exists()


def test_a_second_book_of_the_same_name_is_refused_unless_replacing(api):
    first = _import(api).json()
    assert _import(api).status_code == 409
    data = {"entries": {"1": {"uid": 1, "key": ["new"], "content": "replaced"}}}
    replaced = _import(api, data, replace=True)
    assert replaced.status_code == 201 and replaced.json()["id"] == first["id"]
    assert [e.uid for e in LorebookEntry.objects.all()] == [1]


def test_another_users_book_is_a_404(api, other_api):
    book = _import(api).json()
    for method in ("get", "patch", "delete"):
        assert getattr(other_api, method)(f"/api/v1/lorebooks/{book['id']}/", format="json").status_code == 404
    assert other_api.get(f"/api/v1/lorebooks/{book['id']}/export").status_code == 404
    assert other_api.get("/api/v1/lorebooks/").json() == []
    assert Lorebook.objects.filter(id=book["id"]).exists()


def test_scope_and_name_change_and_delete(api):
    book = _import(api).json()
    changed = api.patch(f"/api/v1/lorebooks/{book['id']}/", {"scope": "global", "name": "Sea"}, format="json")
    assert changed.status_code == 200 and changed.json()["scope"] == "global" and changed.json()["name"] == "Sea"
    bad = api.patch(f"/api/v1/lorebooks/{book['id']}/", {"scope": "everywhere"}, format="json")
    assert bad.status_code == 400 and "scope" in json.dumps(bad.json())
    assert api.delete(f"/api/v1/lorebooks/{book['id']}/").status_code == 204
    assert not Lorebook.objects.exists()


def test_a_moderator_sees_a_book_and_its_entries(api, user, admin_client):
    book = _import(api).json()
    page = admin_client.get(f"/admin/lorebooks/lorebook/{book['id']}/change/")
    assert page.status_code == 200 and "lantern" in page.content.decode()
