"""Lorebooks in multi-device sync, through the API: a book made on one device reaches another whole; an entry
edited on a page counts as the server's change of its book; stale, concurrent, edited and deleted versions follow
the rules characters follow; a name already taken is kept beside; bad input is a 400 naming the change and field,
with nothing stored; another account's book is out of reach."""

from __future__ import annotations

import uuid

import pytest

from apps.lorebooks.models import Lorebook, LorebookEntry
from apps.lorebooks.services.books import entry_save, lorebook_import, lorebook_update
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedEntry

pytestmark = pytest.mark.django_db

LANTERN = {"uid": 0, "key": ["lantern"], "content": "Whale oil.", "comment": "The lantern", "custom": 7}
GULL = {"uid": 1, "key": ["gull"], "content": "Hale's ship.", "comment": "The Gull"}


def book_change(uid, clock, op="create", when=None, **data):
    change = {"type": "lorebook", "op": op, "uid": str(uid), "clock": clock, "data": data}
    if when:
        change["modified_at"] = when
    return change


def harbour(uid, clock=None, **more):
    data = {"name": "Harbour", "scope": "linked", "book": {"entries": {"0": LANTERN, "1": GULL}, "originalData": {}}}
    return book_change(uid, clock or {"laptop": 1}, **{**data, **more})


def push(api, instance, *changes, status=200):
    response = api.post("/api/v1/sync/push", {"instance": instance, "changes": list(changes)}, format="json")
    assert response.status_code == status, response.json()
    return response.json()


def pulled(api, instance, uid):
    items = api.post("/api/v1/sync/pull", {"instance": instance}, format="json").json()["items"]
    return [item for item in items if item["uid"] == str(uid)]


def test_a_book_made_on_one_device_reaches_another_whole(api, user):
    uid = uuid.uuid4()
    (outcome,) = push(api, "laptop", harbour(uid))["results"]
    assert outcome["result"] == "applied" and outcome["clock"] == {"laptop": 1}
    book = Lorebook.objects.get(user=user, uid=uid)
    assert book.clock == {"laptop": 1} and book.changed_by == "laptop" and book.source_instance == "laptop"
    (item,) = pulled(api, "phone", uid)
    assert item["type"] == "lorebook" and item["clock"] == {"laptop": 1} and not item["deleted"]
    assert item["data"]["name"] == "Harbour" and item["data"]["scope"] == "linked"
    assert item["data"]["book"]["originalData"] == {}
    assert item["data"]["book"]["entries"]["0"]["custom"] == 7  # every key kept, as an import keeps it
    assert set(item["data"]["book"]["entries"]) == {"0", "1"}
    exported = api.get(f"/api/v1/lorebooks/{book.pk}/export").json()
    assert exported == item["data"]["book"]


def test_an_entry_edited_on_the_page_is_the_servers_change_of_its_book(api, web, user):
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    book = Lorebook.objects.get(uid=uid)
    cursor = api.post("/api/v1/sync/pull", {"instance": "phone"}, format="json").json()["cursor"]
    response = web.post(f"/lorebooks/{book.pk}/entries/0/", {
        "comment": "Lantern", "key": "lantern", "keysecondary": "", "selectiveLogic": 0, "content": "It burns oil.",
        "position": 4, "depth": 2, "role": 1, "order": 50, "probability": 100,
    })  # fmt: skip
    assert response.status_code == 302
    later = api.post("/api/v1/sync/pull", {"instance": "phone", "cursor": cursor}, format="json").json()["items"]
    (item,) = [item for item in later if item["uid"] == str(uid)]
    assert item["clock"] == {"laptop": 1, "server": 1} and item["changed_by"] == ""
    assert item["data"]["book"]["entries"]["0"]["content"] == "It burns oil."
    # The laptop renames the book meanwhile, on the version it had: concurrent, and the later write wins (a time
    # ahead is taken as a second from now). It sent the name alone, so the entry edited on the page is kept.
    later = "2099-01-01T00:00:00Z"
    (renamed,) = push(api, "laptop", book_change(uid, {"laptop": 2}, op="update", when=later, name="Old harbour"))[
        "results"
    ]
    assert renamed["result"] == "conflict_resolved" and renamed["winner"] == "incoming"
    book.refresh_from_db()
    assert book.name == "Old harbour" and book.clock == {"laptop": 2, "server": 1}
    assert book.entries.get(uid=0).data["content"] == "It burns oil."


def test_a_version_a_concurrent_push_replaced_is_kept_as_a_revision(api, web, user):
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    book = Lorebook.objects.get(uid=uid)
    response = web.post(f"/lorebooks/{book.pk}/entries/0/", {
        "comment": "Lantern", "key": "lantern", "keysecondary": "", "selectiveLogic": 0, "content": "It burns oil.",
        "position": 4, "depth": 2, "role": 1, "order": 50, "probability": 100,
    })  # fmt: skip
    assert response.status_code == 302
    # The laptop, which never saw the edit, sends its own entries later: last write wins takes them.
    entries = {"0": {**LANTERN, "content": "Now fish oil."}}
    later = "2099-01-01T00:00:00Z"
    (outcome,) = push(api, "laptop", harbour(uid, {"laptop": 2}, op="update", when=later, book={"entries": entries}))[
        "results"
    ]
    assert outcome["result"] == "conflict_resolved" and outcome["winner"] == "incoming"
    assert book.entries.get(uid=0).data["content"] == "Now fish oil."

    # The page's edit is not lost: the version it was in is a revision, which the book's page offers to restore.
    (revision,) = book.revisions.all()
    assert revision.reason == "Replaced by laptop's version (sync)"
    assert revision.data["entries"]["0"]["content"] == "It burns oil." and revision.entry_count == 2
    assert "Replaced by laptop&#x27;s version (sync)" in web.get(f"/lorebooks/{book.pk}/").content.decode()

    # A push from a device that had that version (its clock descends from the book's) replaces nothing it lacked.
    clock = Lorebook.objects.get(uid=uid).clock
    push(api, "laptop", harbour(uid, {**clock, "laptop": clock["laptop"] + 1}, op="update", book={"entries": {}}))
    assert book.entries.count() == 0 and book.revisions.count() == 1


def test_one_push_of_many_stale_edits_keeps_one_revision_and_the_persons_edit(api, web, user):
    """A device (broken, or hostile on the person's own account) sends many edits of one book from an old version in
    one push: the version before the push is kept once, and the kept ones are not pushed out."""
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    book = Lorebook.objects.get(uid=uid)
    entry_save(book=book, uid=0, changes={"content": "It burns oil."})
    edits = [
        harbour(uid, {"laptop": 1}, op="edit", book={"entries": {"0": {**LANTERN, "content": f"Version {n}."}}})
        for n in range(25)
    ]
    push(api, "laptop", *edits)

    assert book.entries.get(uid=0).data["content"] == "Version 24."
    (revision,) = book.revisions.all()
    assert revision.data["entries"]["0"]["content"] == "It burns oil."


def test_a_push_that_replaces_the_entries_answers_the_clock_it_stored(api, user):
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    entries = {"0": {**LANTERN, "content": "Now fish oil."}}
    (outcome,) = push(api, "laptop", harbour(uid, {"laptop": 2}, op="update", book={"entries": entries}))["results"]
    book = Lorebook.objects.get(uid=uid)
    assert outcome["result"] == "applied" and outcome["clock"] == {"laptop": 2} == book.clock
    assert list(book.entries.values_list("uid", flat=True)) == [0]
    assert book.entries.get().data["content"] == "Now fish oil."
    # A change of its scope alone keeps its entries.
    push(api, "laptop", book_change(uid, {"laptop": 3}, op="update", scope="global"))
    book.refresh_from_db()
    assert book.scope == "global" and book.entries.count() == 1 and book.clock == {"laptop": 3}


def test_stale_and_concurrent_versions_follow_last_write_wins(api, user):
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    push(api, "laptop", harbour(uid, {"laptop": 2}, op="update", name="Harbour town"))
    (stale,) = push(api, "phone", harbour(uid, {"laptop": 1, "phone": 1}, op="update", name="Bay"))["results"]
    # {laptop 1, phone 1} is concurrent with {laptop 2}: the later write wins (the phone's, made now).
    assert stale["result"] == "conflict_resolved" and stale["winner"] == "incoming"
    book = Lorebook.objects.get(uid=uid)
    assert book.name == "Bay" and book.clock == {"laptop": 2, "phone": 1}
    (old,) = push(api, "laptop", harbour(uid, {"laptop": 1}, op="update", name="Ancient"))["results"]
    assert old["result"] == "rejected" and old["reason"] == "stale" and old["item"]["data"]["name"] == "Bay"
    early = "2020-01-01T00:00:00Z"
    (lost,) = push(api, "tablet", harbour(uid, {"laptop": 2, "tablet": 1}, op="update", name="Old", when=early))[
        "results"
    ]
    assert (
        lost["result"] == "conflict_resolved" and lost["winner"] == "server" and lost["item"]["data"]["name"] == "Bay"
    )
    assert Lorebook.objects.get(uid=uid).name == "Bay"


def test_a_persons_edit_overwrites_a_newer_book_and_its_clock_descends_from_both(api, user):
    """`edit`: a person's correction, sent from a device that had not seen the latest version. An `update` on that
    version would be rejected as stale; the edit is applied, whatever the clocks say, and every device learns it."""
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    push(api, "phone", book_change(uid, {"laptop": 1, "phone": 1}, op="update", name="Harbour at night"))
    (stale,) = push(api, "laptop", book_change(uid, {"laptop": 1}, op="update", name="Harbour by day"))["results"]
    assert stale["result"] == "rejected" and stale["reason"] == "stale"

    entries = {"0": {**LANTERN, "content": "It burns fish oil."}}
    (edited,) = push(api, "laptop", harbour(uid, {"laptop": 1}, op="edit", name="Harbour by day", book={
        "entries": entries}))["results"]  # fmt: skip

    assert edited["result"] == "applied"
    book = Lorebook.objects.get(uid=uid)
    assert book.name == "Harbour by day" and book.clock == edited["clock"]
    assert clocks.compare(book.clock, {"laptop": 1, "phone": 1}) is Order.AFTER  # descends from both versions
    assert [entry.data["content"] for entry in book.entries.all()] == ["It burns fish oil."]
    (item,) = pulled(api, "tablet", uid)
    assert item["data"]["name"] == "Harbour by day" and item["clock"] == edited["clock"]
    assert item["data"]["book"]["entries"]["0"]["content"] == "It burns fish oil."


def test_a_deleted_book_leaves_a_tombstone_and_never_comes_back(api, web, user):
    uid = uuid.uuid4()
    push(api, "laptop", harbour(uid))
    (deleted,) = push(api, "phone", book_change(uid, {"laptop": 1, "phone": 1}, op="delete"))["results"]
    assert deleted["result"] == "applied" and not Lorebook.objects.filter(uid=uid).exists()
    assert not LorebookEntry.objects.exists()
    (item,) = pulled(api, "laptop", uid)
    assert item["deleted"] and item["deleted_by"] == "phone"
    (again,) = push(api, "laptop", harbour(uid, {"laptop": 2}, op="update"))["results"]
    assert again["result"] == "rejected" and again["reason"] == "deleted"
    (recreated,) = push(api, "laptop", harbour(uid, {"laptop": 3}))["results"]
    assert recreated["result"] == "rejected" and not Lorebook.objects.filter(uid=uid).exists()
    # A book deleted on its page leaves one too.
    book = lorebook_import(user=user, name="Moor", data={"entries": {"0": LANTERN}})
    assert web.post(f"/lorebooks/{book.pk}/delete/").status_code == 302
    assert FeedEntry.objects.get(type="lorebook", uid=book.uid).deleted_at is not None


def test_a_name_another_book_holds_is_kept_beside_and_the_device_told(api, user):
    lorebook_import(user=user, name="Harbour", data={"entries": {}})
    uid = uuid.uuid4()
    (outcome,) = push(api, "laptop", harbour(uid))["results"]
    assert outcome["result"] == "applied" and outcome["item"]["data"]["name"] == "Harbour (2)"
    assert sorted(Lorebook.objects.filter(user=user).values_list("name", flat=True)) == ["Harbour", "Harbour (2)"]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"book": {"entries": {"0": {"uid": 0, "key": ["x"], "position": 12}}}}, "book"),
        ({"book": {"entries": {"0": {"uid": 0, "key": ["/(unclosed/"]}}}}, "book"),
        ({"book": {"no_entries": {}}}, "book"),
        ({"name": ""}, "name"),
        ({"name": "a/b"}, "name"),
        ({"scope": "everywhere"}, "scope"),
    ],
)
def test_a_bad_book_is_a_400_naming_the_change_and_field_and_nothing_is_stored(api, user, data, path):
    good = harbour(uuid.uuid4())
    bad = harbour(uuid.uuid4(), **data)
    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [good, bad]}, format="json")
    assert response.status_code == 400, response.json()
    assert path in response.json()["changes"]["1"]["data"]
    assert not Lorebook.objects.exists() and not FeedEntry.objects.filter(type="lorebook").exists()


def test_a_push_of_too_many_entries_is_refused_before_they_are_checked(api, user):
    entries = {str(n): {"uid": n, "key": [f"k{n}"], "content": ""} for n in range(7_000)}
    changes = [harbour(uuid.uuid4(), name=f"Book {n}", book={"entries": entries}) for n in range(3)]
    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": changes}, format="json")
    assert response.status_code == 400 and "20,000 lorebook entries" in str(response.json()["changes"])
    assert not Lorebook.objects.exists()


def test_another_accounts_book_is_out_of_reach(api, other_api, other_user):
    theirs = lorebook_import(user=other_user, name="Secret", data={"entries": {"0": LANTERN}})
    response = api.post("/api/v1/sync/push", {"instance": "laptop", "changes": [harbour(theirs.uid)]}, format="json")
    assert response.status_code == 409 and response.json()["error"] == "uid_unavailable"
    (update,) = push(api, "laptop", harbour(theirs.uid, {"laptop": 2}, op="update", name="Mine"))["results"]
    assert update["result"] == "rejected" and update["reason"] == "unknown" and update["item"] is None
    (delete,) = push(api, "laptop", book_change(theirs.uid, {"laptop": 3}, op="delete"))["results"]
    assert delete["reason"] == "unknown"
    theirs.refresh_from_db()
    assert theirs.name == "Secret" and theirs.entries.count() == 1
    assert not pulled(api, "laptop", theirs.uid)
    assert pulled(other_api, "desk", theirs.uid)[0]["data"]["name"] == "Secret"


def test_a_retried_push_changes_nothing(api, user):
    uid = uuid.uuid4()
    first = push(api, "laptop", harbour(uid))["results"]
    book = Lorebook.objects.get(uid=uid)
    entry_ids = sorted(book.entries.values_list("id", flat=True))
    again = push(api, "laptop", harbour(uid))["results"]
    assert again[0]["result"] == "applied" and again[0]["clock"] == first[0]["clock"] == {"laptop": 1}
    book.refresh_from_db()
    assert book.clock == {"laptop": 1} and sorted(book.entries.values_list("id", flat=True)) == entry_ids


def test_a_rename_of_a_book_read_before_its_entries_changed_counts_after_them(user):
    book = lorebook_import(user=user, name="Harbour", data={"entries": {"0": LANTERN}})
    entry_save(book=Lorebook.objects.get(pk=book.pk), uid=0, changes={"content": "It burns oil."})
    stored = Lorebook.objects.get(pk=book.pk)
    lorebook_update(book=book, name="Old harbour")  # `book` holds the clock and version of its import
    renamed = Lorebook.objects.get(pk=book.pk)
    assert renamed.name == "Old harbour" and renamed.entries_version == stored.entries_version
    assert clocks.compare(renamed.clock, stored.clock) is Order.AFTER and renamed.changed_at > stored.changed_at
