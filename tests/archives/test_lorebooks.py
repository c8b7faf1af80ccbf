"""Lorebooks in account archives (apps/archives/services/archive/import_lorebooks.py): written with their entries,
imported into another account whole, the later version kept on a merge, the archive's brought back by a restore with
the newer one kept beside it, a same-named book never overwritten, and a bad entry refused naming its file and
line with nothing changed. A backup is such an archive."""

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
from apps.sync.models import FeedEntry

pytestmark = pytest.mark.django_db

WORLD = {"originalData": {"name": "Harbour"}, "entries": {
    "0": {"uid": 0, "key": ["gull"], "content": "The Gull is Hale's ship.", "comment": "The Gull", "position": 0,
          "futureField": {"kept": True}},
    "7": {"uid": 7, "key": ["/storms?/i"], "content": "Storms come from the west.", "position": 4, "depth": 1},
}}  # fmt: skip


@pytest.fixture
def harbour(user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    return lorebook_update(book=book, scope="global")


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
    assert entries == [WORLD["entries"]["0"], WORLD["entries"]["7"]] and manifest["counts"]["lorebooks"] == 1


def test_another_account_gets_the_books_as_they_were(user, other_user, harbour):
    counts = archive_import(user=other_user, source=written(user))
    assert counts["lorebooks"] == {"created": 1}
    theirs = Lorebook.objects.get(user=other_user)
    assert theirs.uid != harbour.uid  # another account's uid is not taken
    assert (theirs.name, theirs.scope) == ("Harbour", "global")
    assert lorebook_export(book=theirs) == lorebook_export(book=harbour)
    again = archive_import(user=other_user, source=written(user))
    assert again["lorebooks"] == {"kept": 1} and Lorebook.objects.filter(user=other_user).count() == 1


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


def test_a_deleted_book_comes_back_and_a_same_named_one_is_not_overwritten(user, harbour):
    archive = written(user).getvalue()
    harbour.delete()
    lorebook_import(user=user, name="Harbour", data={"entries": {"0": {"uid": 0, "content": "Another book."}}})
    counts = archive_import(user=user, source=io.BytesIO(archive))
    assert counts["lorebooks"] == {"renamed": 1}
    assert sorted(Lorebook.objects.filter(user=user).values_list("name", flat=True)) == ["Harbour", "Harbour (2)"]
    assert LorebookEntry.objects.get(lorebook__name="Harbour", uid=0).data["content"] == "Another book."
    # Back on the sync feed too: its tombstone went, so the account's devices get it again.
    entry = FeedEntry.objects.get(type="lorebook", uid=harbour.uid)
    assert entry.deleted_at is None and entry.seq is None


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
