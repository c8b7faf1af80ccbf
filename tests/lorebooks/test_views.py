"""The lorebooks pages: import a file through the form, a book's entries searched and paged, the entry form, and
another user's book a 404."""

from __future__ import annotations

import io
import json
import re

import pytest

from apps.lorebooks.models import Lorebook, LorebookEntry
from apps.lorebooks.services.books import lorebook_import

pytestmark = pytest.mark.django_db

WORLD = {"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "Whale oil.", "comment": "The lantern"},
                     "1": {"uid": 1, "key": ["gull"], "content": "Hale's ship.", "comment": "The Gull"}}}  # fmt: skip


def _file(data, name="Harbour.json"):
    upload = io.BytesIO(json.dumps(data).encode())
    upload.name = name
    return upload


def test_a_file_imported_through_the_form_opens_its_book(web, user):
    response = web.post("/lorebooks/", {"file": _file(WORLD)})
    book = Lorebook.objects.get(user=user)
    assert response.status_code == 302 and response["Location"] == f"/lorebooks/{book.pk}/"
    page = web.get(f"/lorebooks/{book.pk}/").content.decode()
    assert "The lantern" in page and "The Gull" in page and "Export for SillyTavern" in page
    assert "Harbour" in web.get("/lorebooks/").content.decode()


def test_a_bad_file_says_which_entry_and_field_and_stores_nothing(web, user):
    bad = {"entries": {"4": {"uid": 4, "key": ["x"], "position": 12}}}
    page = web.post("/lorebooks/", {"file": _file(bad)}, follow=True).content.decode()
    assert "Nothing was imported" in page and "entry 4, field position" in page
    assert not Lorebook.objects.exists()


UNREADABLE = [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"entries": {"0": {"uid": 0, "key": ["a"], "content": "x", "weight": NaN}}}', "NaN is not valid JSON"),
    (b'{"entries": {}, "scale": 1e400}', "too large to store"),
    (b'{"entries": {}, "oops"', "not JSON"),
    (b'{"entries": {}, "name": "\xff"}', "not JSON"),
]


@pytest.mark.parametrize(("body", "said"), UNREADABLE)
def test_a_file_of_json_a_book_cannot_hold_is_refused_on_the_page_and_the_api(web, api, user, body, said):
    """Once a server error (the page and the API parsed uploads leniently): NaN and an infinite number reached
    PostgreSQL, which refused the JSON, and a deep file passed what the parser follows."""
    upload = io.BytesIO(body)
    upload.name = "Harbour.json"
    page = web.post("/lorebooks/", {"file": upload}, follow=True)
    assert page.status_code == 200 and "Nothing was imported" in page.content.decode()
    assert said in page.content.decode()
    upload.seek(0)
    answer = api.post("/api/v1/lorebooks/", {"file": upload}, format="multipart")
    assert answer.status_code == 400 and answer.json()["extra"]["field"] == "file" and said in answer.json()["message"]
    assert not Lorebook.objects.exists()


@pytest.mark.parametrize(("book", "said"), [(body, said) for body, said in UNREADABLE[:3]])
def test_a_json_body_a_book_cannot_hold_is_refused(api, user, book, said):
    """The import as JSON (`{"name", "data"}`) was parsed by DRF's lenient parser: the same values were 500s."""
    body = b'{"name": "Harbour", "data": ' + book + b"}"
    answer = api.generic("POST", "/api/v1/lorebooks/", body, content_type="application/json")
    assert answer.status_code == 400 and said in str(answer.json()), answer.content[:300]
    assert not Lorebook.objects.exists()


def test_the_entries_are_searched(web, user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    page = web.get(f"/lorebooks/{book.pk}/?q=whale").content.decode()
    assert "The lantern" in page and "The Gull" not in page
    # A NUL character, which PostgreSQL refuses in a query (a server error before), is left out of the search.
    page = web.get(f"/lorebooks/{book.pk}/", {"q": "wha\x00le"})
    assert page.status_code == 200 and "The lantern" in page.content.decode()


def test_the_books_are_paged_and_found_by_name(web, user, other_user):
    for n in range(30):
        lorebook_import(user=user, name=f"Harbour {n:02}", data=WORLD)
    lorebook_import(user=user, name="Mountain pass", data=WORLD)
    lorebook_import(user=other_user, name="Harbour of Bob", data=WORLD)
    first = web.get("/lorebooks/").content.decode()
    assert len(re.findall(r'href="/lorebooks/\d+/"', first)) == 25
    assert "Harbour 00" in first and "Harbour 24" in first and "Harbour 25" not in first
    assert "Page 1 of 2" in first and "Harbour of Bob" not in first
    second = web.get("/lorebooks/", {"page": 2}).content.decode()
    assert "Harbour 25" in second and "Mountain pass" in second and "Harbour 00" not in second
    assert "Harbour of Bob" not in second
    found = web.get("/lorebooks/", {"q": "mountain"}).content.decode()
    assert "Mountain pass" in found and "Harbour 0" not in found and "Page 1" not in found
    none = web.get("/lorebooks/", {"q": "bob"}).content.decode()
    assert "Harbour of Bob" not in none and "No book's name holds “bob”." in none
    # A page past the last, or not a number, shows the last or the first, as the other lists do.
    assert "Mountain pass" in web.get("/lorebooks/", {"page": 99}).content.decode()
    assert "Harbour 00" in web.get("/lorebooks/", {"page": "x\x00"}).content.decode()


def test_the_entry_form_changes_an_entry_and_keeps_its_other_fields(web, user):
    data = {"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "x", "excludeRecursion": True, "custom": 7}}}
    book = lorebook_import(user=user, name="Harbour", data=data)
    form = web.get(f"/lorebooks/{book.pk}/entries/0/").content.decode()
    assert 'value="lantern"' in form
    response = web.post(f"/lorebooks/{book.pk}/entries/0/", {
        "comment": "Lantern", "key": "lantern, /lamps?/i", "keysecondary": "", "selectiveLogic": 0,
        "content": "It burns whale oil.", "position": 4, "depth": 2, "role": 1, "order": 50, "probability": 100,
    })  # fmt: skip
    assert response.status_code == 302
    entry = LorebookEntry.objects.get(lorebook=book, uid=0).data
    assert entry["key"] == ["lantern", "/lamps?/i"] and entry["content"] == "It burns whale oil."
    assert (entry["position"], entry["depth"], entry["role"]) == (4, 2, 1)
    assert entry["excludeRecursion"] is True and entry["custom"] == 7


def test_a_regex_key_that_does_not_compile_is_shown_and_not_saved(web, user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    response = web.post(f"/lorebooks/{book.pk}/entries/0/", {
        "key": "/(unclosed/", "selectiveLogic": 0, "position": 0, "depth": 4, "role": 0, "order": 100,
        "probability": 100,
    })  # fmt: skip
    assert response.status_code == 400 and "does not compile" in response.content.decode()
    assert LorebookEntry.objects.get(lorebook=book, uid=0).data["key"] == ["lantern"]


def test_a_new_entry_takes_the_first_free_uid_and_delete_removes_it(web, user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    web.post(f"/lorebooks/{book.pk}/entries/new/", {"key": "bell", "content": "Rings at dusk.", "selectiveLogic": 0,
             "position": 1, "depth": 4, "role": 0, "order": 100, "probability": 100})  # fmt: skip
    assert LorebookEntry.objects.get(lorebook=book, uid=2).data["content"] == "Rings at dusk."
    web.post(f"/lorebooks/{book.pk}/entries/2/delete/")
    assert not LorebookEntry.objects.filter(lorebook=book, uid=2).exists()


def test_the_export_downloads_the_file_sillytavern_loads(web, user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    response = web.get(f"/lorebooks/{book.pk}/export/")
    assert response["Content-Disposition"] == 'attachment; filename="Harbour.json"'
    assert set(json.loads(response.content)["entries"]) == {"0", "1"}


def test_a_book_named_in_any_script_downloads_under_its_own_name(web, user):
    book = lorebook_import(user=user, name='Мира\'s "harbour"', data=WORLD)
    response = web.get(f"/lorebooks/{book.pk}/export/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        "attachment; filename*=utf-8''%D0%9C%D0%B8%D1%80%D0%B0%27s%20%22harbour%22.json"
    )


def test_another_users_book_is_a_404_on_every_page(client, other_user, user):
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    client.force_login(other_user)
    for path in ("", "export/", "entries/0/", "entries/new/"):
        assert client.get(f"/lorebooks/{book.pk}/{path}").status_code == 404
    for path in ("change/", "delete/", "entries/0/delete/"):
        assert client.post(f"/lorebooks/{book.pk}/{path}", {"scope": "global"}).status_code == 404
    assert Lorebook.objects.get(pk=book.pk).scope == "linked" and book.entries.count() == 2


def test_a_file_refused_says_what_a_person_can_do_in_words_of_the_page(web, user):
    """The API's words name fields in backticks; the page shows them as code, not as backticks. A name already
    taken says where the checkbox that replaces the book is."""
    upload = io.BytesIO(b"[]")
    upload.name = "Harbour.json"
    page = web.post("/lorebooks/", {"file": upload}, follow=True).content.decode()
    assert "A World Info file is an object with <code>entries</code>." in page and "`entries`" not in page
    lorebook_import(user=user, name="Harbour", data={"entries": {}})
    upload = io.BytesIO(b'{"entries": {}}')
    upload.name = "Harbour.json"
    page = web.post("/lorebooks/", {"file": upload}, follow=True).content.decode()
    assert "You already have a lorebook named &#x27;Harbour&#x27;." in page
    assert "Tick “Replace my book of the same name”, or name this one otherwise." in page


def test_a_message_with_markup_in_backticks_is_shown_as_text(web, user):
    upload = io.BytesIO(b'{"entries": {}}')
    upload.name = "<b>x`<i>y`.json"
    lorebook_import(user=user, name=upload.name, data={"entries": {}})
    page = web.post("/lorebooks/", {"file": upload}, follow=True).content.decode()
    assert "<b>x" not in page and "<i>y" not in page and "&lt;b&gt;x<code>&lt;i&gt;y</code>" in page
