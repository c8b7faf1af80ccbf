"""A book edited here and SillyTavern's copy of it (apps/lorebooks/services/revisions.py): the copy sent again
unchanged (every time SillyTavern opens the chat) leaves the edit; a changed copy replaces it and the edit is kept as
an earlier version, listed, downloaded and restored on the book's page and over the API; another user's versions are
a 404 everywhere."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from apps.chats.services.chats import chat_create
from apps.lorebooks.models import Lorebook, LorebookEntry, LorebookRevision
from apps.lorebooks.services import revisions
from apps.lorebooks.services.books import lorebook_export, lorebook_import
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

FORM = {"comment": "Lantern", "key": "lantern", "keysecondary": "", "selectiveLogic": 0, "position": 0,
        "depth": 4, "role": 0, "order": 100, "probability": 100}  # fmt: skip


def _book(content: str, uid: int = 0) -> dict:
    return {"entries": {str(uid): {"uid": uid, "key": ["lantern"], "content": content, "position": 0}}}


@pytest.fixture
def chat(user):
    return chat_create(user=user, title="Harbour", character_ids=[CharacterFactory(user=user, name="Mira").pk])


def _send(api, chat, data, name="Harbour"):
    """What the SillyTavern extension sends when the chat opens or the book changes there."""
    response = api.post(
        f"/api/v1/chats/{chat.pk}/lorebooks", {"books": [{"name": name, "data": data, "use": "chat"}]}, format="json"
    )
    assert response.status_code == 200, response.content
    return Lorebook.objects.get(user=chat.user, name=name.removesuffix(".json"))


def _content(book) -> str:
    return LorebookEntry.objects.get(lorebook=book, uid=0).data["content"]


def _edit_here(web, book, content: str) -> None:
    """An entry changed through its form on the book's page."""
    response = web.post(f"/lorebooks/{book.pk}/entries/0/", {**FORM, "content": content})
    assert response.status_code == 302, response.content.decode()


def test_an_edit_here_stays_when_sillytavern_sends_its_unchanged_copy_again(api, web, chat):
    book = _send(api, chat, _book("Whale oil."))
    _edit_here(web, book, "Whale oil, and a wick trimmed by Mira.")
    for _ in range(2):  # SillyTavern reloaded, the chat opened again
        book = _send(api, chat, _book("Whale oil."))
    assert _content(book) == "Whale oil, and a wick trimmed by Mira."
    assert not LorebookRevision.objects.exists()
    page = web.get(f"/lorebooks/{book.pk}/").content.decode()
    assert "SillyTavern sends its own copy of this book" in page and 'id="revisions"' not in page


def test_a_changed_copy_replaces_the_edit_and_keeps_it_to_download_and_restore(api, web, chat):
    book = _send(api, chat, _book("Whale oil."))
    _edit_here(web, book, "Edited in Lorekeeper.")
    book = _send(api, chat, _book("Edited in SillyTavern."))
    assert _content(book) == "Edited in SillyTavern."
    [kept] = LorebookRevision.objects.filter(lorebook=book)
    assert kept.reason == "Replaced by SillyTavern's copy" and kept.entry_count == 1
    assert kept.data["entries"]["0"]["content"] == "Edited in Lorekeeper."

    page = web.get(f"/lorebooks/{book.pk}/").content.decode()
    assert "Earlier versions" in page and "Replaced by SillyTavern&#x27;s copy" in page
    download = web.get(f"/lorebooks/{book.pk}/revisions/{kept.pk}/")
    assert download.status_code == 200 and "Harbour.json" in download["Content-Disposition"]
    assert download.json()["entries"]["0"]["content"] == "Edited in Lorekeeper."

    restored = web.post(f"/lorebooks/{book.pk}/revisions/{kept.pk}/restore/", follow=True).content.decode()
    assert "Restored." in restored
    assert _content(book) == "Edited in Lorekeeper."
    before = LorebookRevision.objects.filter(lorebook=book).exclude(pk=kept.pk).get()
    assert before.reason.startswith("Before the version of") and before.data == _book("Edited in SillyTavern.")
    # SillyTavern opens the chat again with its copy unchanged: the restore stays.
    assert _content(_send(api, chat, _book("Edited in SillyTavern."))) == "Edited in Lorekeeper."


def test_a_copy_that_only_follows_sillytavern_keeps_no_version(api, chat):
    _send(api, chat, _book("First."))
    book = _send(api, chat, _book("Second, changed in SillyTavern."))
    assert _content(book) == "Second, changed in SillyTavern." and not LorebookRevision.objects.exists()


def test_a_book_imported_here_that_sillytavern_replaces_is_kept(api, user, chat):
    lorebook_import(user=user, name="Harbour", data=_book("Imported from a file here."))
    book = _send(api, chat, _book("SillyTavern's own."))
    assert _content(book) == "SillyTavern's own."
    assert LorebookRevision.objects.get(lorebook=book).data == _book("Imported from a file here.")


def test_a_book_the_same_as_sillytaverns_from_before_these_records_keeps_no_version(api, user, chat):
    book = lorebook_import(user=user, name="Harbour", data=_book("Whale oil."))
    assert book.client_digest == ""  # a book imported before the client's copy was recorded
    book = _send(api, chat, _book("Whale oil."))
    assert not LorebookRevision.objects.exists()
    assert book.client_digest == revisions.book_digest(_book("Whale oil."))


def test_the_newest_versions_are_kept(user):
    book = lorebook_import(user=user, name="Harbour", data=_book("v0"))
    for number in range(1, revisions.KEPT + 3):
        revisions.revision_keep(book=book, reason=f"v{number}", data=lorebook_export(book=book))
    kept = list(LorebookRevision.objects.filter(lorebook=book).values_list("reason", flat=True))
    assert len(kept) == revisions.KEPT and kept[0] == f"v{revisions.KEPT + 2}" and "v1" not in kept


def test_large_versions_are_kept_within_the_room_for_them_the_newest_always(user, monkeypatch):
    book = lorebook_import(user=user, name="Harbour", data=_book("v0"))
    for number in range(1, 5):  # of one size as stored
        text = "".join(f"{number}{index:04x}" for index in range(300))  # too varied to compress much
        revisions.revision_keep(book=book, reason=f"v{number}", data=_book(text))
        if number == 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_column_size(data) FROM lorebooks_lorebookrevision")
                size = cursor.fetchone()[0]
            monkeypatch.setattr(revisions, "KEPT_BYTES", 2 * size + size // 2)  # room for two
    assert list(LorebookRevision.objects.filter(lorebook=book).values_list("reason", flat=True)) == ["v4", "v3"]
    monkeypatch.setattr(revisions, "KEPT_BYTES", 10)
    revisions.revision_keep(book=book, reason="v5", data=_book("x" * 5000))
    assert list(LorebookRevision.objects.filter(lorebook=book).values_list("reason", flat=True)) == ["v5"]


def test_the_api_lists_downloads_and_restores_a_version(api, web, chat):
    book = _send(api, chat, _book("Whale oil."))
    _edit_here(web, book, "Edited in Lorekeeper.")
    _send(api, chat, _book("Edited in SillyTavern."))
    listed = api.get(f"/api/v1/lorebooks/{book.pk}/revisions/").json()
    assert [(row["reason"], row["entry_count"]) for row in listed] == [("Replaced by SillyTavern's copy", 1)]
    version = listed[0]["id"]
    exported = api.get(f"/api/v1/lorebooks/{book.pk}/revisions/{version}/export")
    assert exported.json()["entries"]["0"]["content"] == "Edited in Lorekeeper."
    restored = api.post(f"/api/v1/lorebooks/{book.pk}/revisions/{version}/restore")
    assert restored.status_code == 200 and restored.json()["entry_count"] == 1
    assert _content(book) == "Edited in Lorekeeper."
    again = api.post(f"/api/v1/lorebooks/{book.pk}/revisions/{version}/restore")
    assert again.status_code == 409 and again.json()["extra"] == {"field": "revision"}
    assert LorebookRevision.objects.filter(lorebook=book).count() == 2  # the refused restore kept nothing


def test_another_users_versions_are_a_404_everywhere(api, web, other_api, client, other_user, chat):
    book = _send(api, chat, _book("Whale oil."))
    _edit_here(web, book, "Mine.")
    _send(api, chat, _book("Replaced."))
    version = LorebookRevision.objects.get(lorebook=book)
    theirs = lorebook_import(user=other_user, name="Theirs", data=_book("Theirs."))
    base = f"/api/v1/lorebooks/{book.pk}/revisions"
    assert other_api.get(f"{base}/").status_code == 404
    assert other_api.get(f"{base}/{version.pk}/export").status_code == 404
    assert other_api.post(f"{base}/{version.pk}/restore").status_code == 404
    # Their own book's id with my version's: not found either.
    assert other_api.post(f"/api/v1/lorebooks/{theirs.pk}/revisions/{version.pk}/restore").status_code == 404
    client.force_login(other_user)
    assert client.get(f"/lorebooks/{book.pk}/revisions/{version.pk}/").status_code == 404
    assert client.post(f"/lorebooks/{book.pk}/revisions/{version.pk}/restore/").status_code == 404
    assert _content(book) == "Replaced." and LorebookRevision.objects.count() == 1


def test_a_restore_goes_into_its_own_book_whatever_its_name(api, user):
    other = lorebook_import(user=user, name="x", data=_book("Only here."))
    book = lorebook_import(user=user, name="x.json.json", data=_book("Now."))  # stored as "x.json"
    version = revisions.revision_keep(book=book, reason="kept", data=_book("Before."))
    response = api.post(f"/api/v1/lorebooks/{book.pk}/revisions/{version.pk}/restore")
    assert response.status_code == 200 and response.json()["id"] == book.pk
    assert (_content(book), _content(other)) == ("Before.", "Only here.")
    assert not LorebookRevision.objects.filter(lorebook=other).exists()


def test_a_copy_named_with_its_file_extension_is_the_same_book(api, web, chat):
    book = _send(api, chat, _book("Whale oil."))
    _edit_here(web, book, "Edited in Lorekeeper.")
    _send(api, chat, _book("Edited in SillyTavern."), name="Harbour.json")
    assert _content(book) == "Edited in SillyTavern."
    assert LorebookRevision.objects.get(lorebook=book).data["entries"]["0"]["content"] == "Edited in Lorekeeper."


def test_numbers_postgresql_stores_in_another_form_are_no_edit_here(api, chat):
    _send(api, chat, {**_book("First."), "scale": 1e20, "zero": -0.0})
    book = _send(api, chat, {**_book("Second."), "scale": 1e20, "zero": -0.0})
    assert _content(book) == "Second." and not LorebookRevision.objects.exists()


def test_a_file_imported_over_a_book_keeps_the_version_it_replaced(api, web, user):
    """A person imports a file over a book (its page's import with "replace", or the API): the book's version, with
    what was edited here, is kept; the same file imported again keeps nothing more."""
    book = lorebook_import(user=user, name="Harbour", data=_book("Whale oil."))
    _edit_here(web, book, "Whale oil, trimmed by Mira.")
    upload = SimpleUploadedFile("Harbour.json", json.dumps(_book("From the file.")).encode(), "application/json")
    page = web.post("/lorebooks/", {"file": upload, "replace": "on"}, follow=True).content.decode()
    assert "Imported" in page and _content(book) == "From the file."
    [kept] = LorebookRevision.objects.filter(lorebook=book)
    assert kept.reason == "Replaced by an imported file" and kept.data["entries"]["0"]["content"] == (
        "Whale oil, trimmed by Mira."
    )
    again = api.post("/api/v1/lorebooks/", {"name": "Harbour", "data": _book("From the file."), "replace": True},
                     format="json")  # fmt: skip
    assert again.status_code == 201, again.content
    assert LorebookRevision.objects.filter(lorebook=book).count() == 1
    other = api.post("/api/v1/lorebooks/", {"name": "Harbour", "data": _book("Another file."), "replace": True},
                     format="json")  # fmt: skip
    assert other.status_code == 201 and _content(book) == "Another file."
    assert [r.data["entries"]["0"]["content"] for r in LorebookRevision.objects.filter(lorebook=book)
            .order_by("-created_at", "-id")] == ["From the file.", "Whale oil, trimmed by Mira."]  # fmt: skip
