"""Lorebooks in account archives (apps/archives/services/archive/import_lorebooks.py): written with their entries
and clocks, imported into another account whole, merged by their clocks as characters are (a conflict to the later
write), deleted by the archive's tombstones and kept deleted here, the archive's brought back by a restore with the
newer one kept beside it, a same-named book never overwritten, an archive from before books had clocks merged by
the later version, and a bad entry refused naming its file and line with nothing changed. A backup is such an
archive."""

from __future__ import annotations

import io
import json
import uuid
import zipfile

import pytest

from apps.archives.services.archive.export import archive_write
from apps.archives.services.archive.format import ArchiveError
from apps.archives.services.archive.importing import archive_import
from apps.lorebooks.models import Lorebook, LorebookEntry
from apps.lorebooks.services.books import entry_save, lorebook_export, lorebook_import, lorebook_update
from apps.sync import clocks
from apps.sync.clocks import Order
from apps.sync.models import FeedEntry
from tests.sync.instances import change, pull, push

pytestmark = pytest.mark.django_db

WORLD = {"originalData": {"name": "Harbour"}, "entries": {
    "0": {"uid": 0, "key": ["gull"], "content": "The Gull is Hale's ship.", "comment": "The Gull", "position": 0,
          "futureField": {"kept": True}},
    "7": {"uid": 7, "key": ["/storms?/i"], "content": "Storms come from the west.", "position": 4, "depth": 1},
}}  # fmt: skip


@pytest.fixture
def harbour(user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    lorebook_update(book=book, scope="global")
    return Lorebook.objects.get(pk=book.pk)  # with the clock its triggers set


def written(user) -> io.BytesIO:
    target = io.BytesIO()
    archive_write(user=user, target=target)
    target.seek(0)
    return target


def test_an_archive_holds_each_book_and_its_entries(user, harbour):
    with zipfile.ZipFile(written(user)) as archive:
        [line] = [json.loads(row) for row in archive.read("lorebooks.jsonl").splitlines()]
        entries = [json.loads(row) for row in archive.read(f"lorebooks/{harbour.uid}.jsonl").splitlines()]
        manifest = json.loads(archive.read("manifest.json"))
    assert (line["uid"], line["name"], line["scope"], line["entries"]) == (str(harbour.uid), "Harbour", "global", 2)
    assert line["extra"] == {"originalData": {"name": "Harbour"}}
    assert line["clock"] == harbour.clock and line["changed_at"] == harbour.changed_at.isoformat()
    assert entries == [WORLD["entries"]["0"], WORLD["entries"]["7"]] and manifest["counts"]["lorebooks"] == 1


def test_another_account_gets_the_books_as_they_were(user, other_user, harbour):
    counts = archive_import(user=other_user, source=written(user))
    assert counts["lorebooks"] == {"created": 1}
    theirs = Lorebook.objects.get(user=other_user)
    assert theirs.uid != harbour.uid  # another account's uid is not taken
    assert (theirs.name, theirs.scope) == ("Harbour", "global")
    assert lorebook_export(book=theirs) == lorebook_export(book=harbour)
    assert (theirs.clock, theirs.changed_at) == (harbour.clock, harbour.changed_at)  # the version as it was
    again = archive_import(user=other_user, source=written(user))
    assert again["lorebooks"] == {"same": 1} and Lorebook.objects.filter(user=other_user).count() == 1
    assert Lorebook.objects.get(user=other_user).clock == harbour.clock


def test_a_merge_keeps_the_later_book_and_a_restore_brings_the_archives_back(user, harbour):
    archive = written(user).getvalue()
    entry_save(book=harbour, uid=0, changes={"content": "The Gull sank."})
    assert archive_import(user=user, source=io.BytesIO(archive))["lorebooks"] == {"kept": 1}
    assert LorebookEntry.objects.get(lorebook=harbour, uid=0).data["content"] == "The Gull sank."
    counts = archive_import(user=user, source=io.BytesIO(archive), restore=True)
    assert counts["lorebooks"] == {"kept beside": 1, "updated": 1}
    assert LorebookEntry.objects.get(lorebook=harbour, uid=0).data["content"] == "The Gull is Hale's ship."
    beside = Lorebook.objects.get(user=user, name="Harbour (before restore)")
    assert LorebookEntry.objects.get(lorebook=beside, uid=0).data["content"] == "The Gull sank."


def test_a_book_deleted_here_stays_deleted_and_a_restore_brings_it_back_by_another_name(user, harbour):
    archive = written(user).getvalue()
    harbour.delete()
    assert archive_import(user=user, source=io.BytesIO(archive))["lorebooks"] == {"deleted here": 1}
    assert not Lorebook.objects.filter(user=user).exists()
    lorebook_import(user=user, name="Harbour", data={"entries": {"0": {"uid": 0, "content": "Another book."}}})
    counts = archive_import(user=user, source=io.BytesIO(archive), restore=True)
    assert counts["lorebooks"] == {"revived": 1}
    assert sorted(Lorebook.objects.filter(user=user).values_list("name", flat=True)) == ["Harbour", "Harbour (2)"]
    assert LorebookEntry.objects.get(lorebook__name="Harbour", uid=0).data["content"] == "Another book."
    # Back on the sync feed too: its tombstone went, so the account's devices get it again.
    entry = FeedEntry.objects.get(type="lorebook", uid=harbour.uid)
    assert entry.deleted_at is None and entry.seq is None


def test_the_archives_tombstone_deletes_a_book_unless_it_came_back_here_since(user, other_user, harbour):
    before = written(user).getvalue()
    harbour.delete()
    after = written(user).getvalue()
    with zipfile.ZipFile(io.BytesIO(after)) as archive:
        (tombstone,) = [json.loads(row) for row in archive.read("tombstones.jsonl").splitlines()]
    assert tombstone["type"] == "lorebook" and clocks.compare(tombstone["clock"], harbour.clock) is Order.AFTER
    archive_import(user=other_user, source=io.BytesIO(before))
    theirs = Lorebook.objects.get(user=other_user)
    counts = archive_import(user=other_user, source=io.BytesIO(after))
    assert counts["tombstones"] == {"applied": 1} and not Lorebook.objects.filter(user=other_user).exists()
    entry = FeedEntry.objects.get(user=other_user, type="lorebook", uid=theirs.uid)
    assert entry.deleted_at is not None and entry.clock == tombstone["clock"]
    # Restored after the deletion: its clock descends from the tombstone's, so the tombstone no longer holds.
    counts = archive_import(user=other_user, source=io.BytesIO(before), restore=True)
    assert counts["lorebooks"] == {"revived": 1}
    back = Lorebook.objects.get(user=other_user)
    assert back.uid == theirs.uid and clocks.compare(back.clock, tombstone["clock"]) is Order.AFTER
    archive_import(user=other_user, source=io.BytesIO(after))
    assert Lorebook.objects.filter(pk=back.pk).exists()


def _line_changed(archive: bytes, **fields) -> io.BytesIO:
    """The archive with its one book's line changed (`None` drops a field)."""
    source, target = zipfile.ZipFile(io.BytesIO(archive)), io.BytesIO()
    with source, zipfile.ZipFile(target, "w") as out:
        for name in source.namelist():
            data = source.read(name)
            if name == "lorebooks.jsonl":
                line = {**json.loads(data), **fields}
                data = json.dumps({key: value for key, value in line.items() if value is not None}).encode()
            out.writestr(name, data)
    target.seek(0)
    return target


@pytest.mark.parametrize("archive_later", [True, False])
def test_a_conflict_goes_to_the_later_write_and_the_clock_descends_from_both(user, harbour, archive_later):
    # The archive's account edited the book on its laptop; this one edited an entry on the server meanwhile.
    (outcome,) = push(user, "laptop", change("update", harbour.uid, {**harbour.clock, "laptop": 1},
                                             type="lorebook", name="Harbour of the laptop"))  # fmt: skip
    assert outcome.result == "applied"
    laptop = Lorebook.objects.get(pk=harbour.pk)
    archive = written(user).getvalue()
    Lorebook.objects.filter(pk=harbour.pk).update(clock=harbour.clock, name="Harbour")  # the other side's past
    entry_save(book=laptop, uid=0, changes={"content": "The Gull sank."})
    here = Lorebook.objects.get(pk=harbour.pk)
    assert clocks.compare(here.clock, laptop.clock) is Order.CONCURRENT
    when = "2099-01-01T00:00:00+00:00" if archive_later else "2000-01-01T00:00:00+00:00"
    _, cursor = pull(user, "phone")
    counts = archive_import(user=user, source=_line_changed(archive, changed_at=when))
    kept = Lorebook.objects.get(pk=harbour.pk)
    assert kept.clock == clocks.merge(laptop.clock, here.clock)
    content = LorebookEntry.objects.get(lorebook=kept, uid=0).data["content"]
    if archive_later:
        assert counts["lorebooks"] == {"updated": 1}
        assert (kept.name, content, kept.changed_by) == ("Harbour of the laptop", "The Gull is Hale's ship.", "laptop")
    else:
        assert counts["lorebooks"] == {"kept": 1} and (kept.name, content) == ("Harbour", "The Gull sank.")
    # Either way the account's devices get the version kept, with its clock.
    (item,) = pull(user, "phone", cursor)[0]
    assert item["uid"] == str(harbour.uid) and item["clock"] == kept.clock and item["data"]["name"] == kept.name


def test_an_archive_from_before_books_had_clocks_merges_by_the_later_version(user, harbour):
    archive = written(user).getvalue()
    old = dict.fromkeys(["clock", "changed_at", "changed_by", "source_instance", "participating_instances"])
    entry_save(book=harbour, uid=0, changes={"content": "The Gull sank."})
    assert archive_import(user=user, source=_line_changed(archive, **old))["lorebooks"] == {"kept": 1}
    LorebookEntry.objects.filter(lorebook=harbour, uid=0).update(data={**WORLD["entries"]["0"], "content": "Old."})
    Lorebook.objects.filter(pk=harbour.pk).update(updated_at="2000-01-01T00:00:00Z")
    clock = Lorebook.objects.get(pk=harbour.pk).clock
    assert archive_import(user=user, source=_line_changed(archive, **old))["lorebooks"] == {"updated": 1}
    book = Lorebook.objects.get(pk=harbour.pk)
    assert LorebookEntry.objects.get(lorebook=book, uid=0).data["content"] == "The Gull is Hale's ship."
    assert clocks.compare(book.clock, clock) is Order.AFTER and book.changed_by == ""  # the server's write


def _archive(index: dict, entries: list[str]) -> io.BytesIO:
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("manifest.json", json.dumps({"format": "lorekeeper-archive", "version": 1}))
        archive.writestr("lorebooks.jsonl", json.dumps(index))
        archive.writestr(f"lorebooks/{index['uid']}.jsonl", "\n".join(entries))
    target.seek(0)
    return target


@pytest.mark.parametrize(
    ("entries", "where", "message"),
    [
        (['{"uid": 0, "content": "ok"}', '{"uid": 1, "position": 9}'], "line 2", "position"),
        (['{"uid": 0, "key": ["/(unclosed/"]}'], "line 1", "key"),
        (['{"uid": 0}', '{"uid": 0}'], "line 2", "uid"),
    ],
)
def test_a_bad_entry_names_its_file_and_line_and_changes_nothing(user, harbour, entries, where, message):
    uid = str(uuid.uuid4())
    index = {"uid": uid, "name": "Bad", "scope": "linked", "updated_at": "2026-11-24T00:00:00Z",
             "file": f"lorebooks/{uid}.jsonl"}  # fmt: skip

    def stored():
        return list(Lorebook.objects.values_list("id", "name", "updated_at")), list(LorebookEntry.objects.values())

    before = stored()
    with pytest.raises(ArchiveError) as error:
        archive_import(user=user, source=_archive(index, entries))
    assert f"lorebooks/{uid}.jsonl, {where}" in error.value.message and message in error.value.message
    assert stored() == before


def test_a_bad_index_line_is_refused(user):
    uid = str(uuid.uuid4())
    index = {"uid": uid, "name": "Bad", "scope": "everywhere", "updated_at": "2026-11-24T00:00:00Z",
             "file": f"lorebooks/{uid}.jsonl"}  # fmt: skip
    with pytest.raises(ArchiveError, match=r"lorebooks.jsonl, line 1: scope"):
        archive_import(user=user, source=_archive(index, []))
    assert not Lorebook.objects.exists()


def test_an_entry_postgresql_cannot_store_names_its_file_and_line(user):
    uid = str(uuid.uuid4())
    index = {"uid": uid, "name": "Bad", "scope": "linked", "updated_at": "2026-11-24T00:00:00Z",
             "file": f"lorebooks/{uid}.jsonl"}  # fmt: skip
    entries = ['{"uid": 0, "content": "ok"}', '{"uid": 1, "content": "a\\u0000b"}']
    with pytest.raises(ArchiveError, match=rf"lorebooks/{uid}.jsonl, line 2: .*content"):
        archive_import(user=user, source=_archive(index, entries))
    assert not Lorebook.objects.exists()


def test_a_restore_keeps_a_newer_book_of_a_long_name_beside(user):
    book = lorebook_import(user=user, name="A" * 195, data=WORLD)
    archive = written(user).getvalue()
    entry_save(book=book, uid=0, changes={"content": "Newer."})
    counts = archive_import(user=user, source=io.BytesIO(archive), restore=True)
    assert counts["lorebooks"] == {"kept beside": 1, "updated": 1}
    assert Lorebook.objects.get(user=user, name__endswith="(before restore)").name == "A" * 183 + " (before restore)"
