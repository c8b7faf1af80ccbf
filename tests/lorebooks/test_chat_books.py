"""The books a client's open chat uses, sent as the client has them (POST /api/v1/chats/{id}/lorebooks, what the
SillyTavern extension sends): imported in place of the book of the same name, a globally active one made global, a
character's linked to the chat's characters so that their replies scan it, a book unchanged not written again; a
bad book refused naming it and its entry with nothing stored; another user's chat a 404."""

from __future__ import annotations

import json

import pytest

from apps.chats.models import Character
from apps.chats.services.chats import chat_create
from apps.lorebooks.models import Lorebook, LorebookEntry
from apps.lorebooks.services.books import lorebook_import
from apps.lorebooks.services.lore import chat_books
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


def _book(content: str) -> dict:
    return {"entries": {"0": {"uid": 0, "key": ["gull"], "content": content, "position": 0}}}


@pytest.fixture
def chat(user):
    mira = CharacterFactory(user=user, name="Mira")
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk])
    chat.chat_metadata = {"world_info": "Chat lore"}  # as the chat's sync brings SillyTavern's metadata
    chat.save(update_fields=["chat_metadata"])
    return chat


def test_the_books_a_chat_uses_become_the_books_its_replies_scan(api, user, chat):
    books = [
        {"name": "Chat lore", "data": _book("From the chat."), "use": "chat"},
        {"name": "Mira's lore", "data": _book("From the character."), "use": "character"},
        {"name": "World", "data": _book("From everywhere."), "use": "global"},
    ]
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": books}, format="json")
    assert response.status_code == 200, response.json()
    assert [(row["name"], row["scope"], row["use"]) for row in response.json()] == [
        ("Chat lore", "linked", "chat"), ("Mira's lore", "linked", "character"), ("World", "global", "global"),
    ]  # fmt: skip
    mira = Character.objects.get(pk=chat.characters.first().pk)
    assert mira.card_data["extensions"]["world"] == "Mira's lore"
    scanned, problems = chat_books(user=user, chat=chat, character=mira)
    assert sorted((book.name, book.kind) for book in scanned) == [
        ("Chat lore", "chat"), ("Mira's lore", "character"), ("World", "global"),
    ] and problems == []  # fmt: skip


def test_a_book_sent_again_replaces_the_one_here_unless_it_is_the_same(api, user, chat):
    url = f"/api/v1/chats/{chat.pk}/lorebooks"
    api.post(url, {"books": [{"name": "World", "data": _book("First."), "use": "chat"}]}, format="json")
    stamp = Lorebook.objects.get(user=user, name="World").updated_at
    api.post(url, {"books": [{"name": "World", "data": _book("First."), "use": "chat"}]}, format="json")
    assert Lorebook.objects.get(user=user, name="World").updated_at == stamp  # unchanged: not written
    edited = {"name": "World", "data": _book("Edited in SillyTavern."), "use": "chat"}
    api.post(url, {"books": [edited]}, format="json")
    assert LorebookEntry.objects.get(lorebook__name="World", uid=0).data["content"] == "Edited in SillyTavern."


def test_a_bad_book_is_refused_naming_it_and_nothing_is_stored(api, user, chat):
    bad = {"entries": {"0": {"uid": 0, "position": 12}}}
    books = [{"name": "Good", "data": _book("Fine."), "use": "global"}, {"name": "Bad", "data": bad, "use": "chat"}]
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": books}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["extra"]["book"] == 1 and body["extra"]["field"] == "position" and "Bad" in body["message"]
    assert not Lorebook.objects.filter(user=user).exists()
    for wrong in ({"books": [{"name": "X", "data": _book("x"), "use": "somewhere"}]}, {"books": "World"}, {}):
        refused = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", wrong, format="json")
        assert refused.status_code == 400 and "books" in str(refused.json()), wrong


def test_another_users_chat_is_a_404_and_gets_nothing(other_api, user, chat):
    books = [{"name": "World", "data": _book("Theirs."), "use": "global"}]
    assert other_api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": books}, format="json").status_code == 404
    assert not Lorebook.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"entries": {"²": {"content": "x"}}}, "uid"),  # a digit that is not an ASCII one
        ({"entries": {"0": {"uid": 0, "content": "a\u0000b"}}}, "content"),  # PostgreSQL stores no NUL
        ({"entries": {"0": {"uid": 0, "content": "x", "future": {"k": "\ud800"}}}}, "future"),  # a lone surrogate
        ({"originalData": "a\u0000", "entries": {}}, "data"),
    ],
)
def test_what_postgresql_cannot_store_is_refused_naming_the_field(api, user, chat, data, field):
    body = json.dumps({"books": [{"name": "World", "data": data, "use": "chat"}]})  # \ud800 escaped, as JSON may
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == field and not Lorebook.objects.exists()


def test_a_character_linked_to_another_book_in_sillytavern_is_linked_to_it_here(api, user, chat):
    url = f"/api/v1/chats/{chat.pk}/lorebooks"
    for name in ("Mira v1", "Mira v2"):
        api.post(url, {"books": [{"name": name, "data": _book(name), "use": "character"}]}, format="json")
    assert Character.objects.get(pk=chat.characters.first().pk).card_data["extensions"]["world"] == "Mira v2"


def test_a_book_taken_off_the_clients_global_list_becomes_linked_here(api, user, chat):
    url = f"/api/v1/chats/{chat.pk}/lorebooks"
    books = [{"name": name, "data": _book(name), "use": "global"} for name in ("World", "Sea")]
    api.post(url, {"books": books}, format="json")
    lorebook_import(user=user, name="Only here", data=_book("Made on the web."))
    Lorebook.objects.filter(user=user, name="Only here").update(scope="global")
    # The person takes World off SillyTavern's global list; Sea stays on it, and "Only here" SillyTavern lacks.
    body = {"books": [books[1]], "not_global": ["World", "Mira's lore", "Sea"]}
    response = api.post(url, body, format="json")
    assert response.status_code == 200, response.json()
    scopes = dict(Lorebook.objects.filter(user=user).values_list("name", "scope"))
    assert scopes == {"World": "linked", "Sea": "global", "Only here": "global"}
    scanned, _ = chat_books(user=user, chat=chat, character=None)
    assert sorted(book.name for book in scanned) == ["Only here", "Sea"]


@pytest.mark.parametrize(
    ("not_global", "problem"),
    [("World", "list"), (["W" * 201], "200"), (["a\u0000b"], "Null"), (["\ud800"], "not_global"),
     (["x"] * 5001, "5000")],
)  # fmt: skip
def test_a_bad_not_global_list_is_refused_naming_it_and_changes_nothing(api, user, chat, not_global, problem):
    api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": [{"name": "World", "data": _book("x"), "use": "global"}]},
             format="json")  # fmt: skip
    body = json.dumps({"books": [], "not_global": not_global})  # \ud800 escaped, as JSON may
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "not_global" in response.content.decode() and problem in response.content.decode()
    assert Lorebook.objects.get(user=user, name="World").scope == "global"


def test_another_users_global_book_is_out_of_reach(api, other_user, chat):
    theirs = lorebook_import(user=other_user, name="World", data=_book("Theirs."))
    Lorebook.objects.filter(pk=theirs.pk).update(scope="global")
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": [], "not_global": ["World"]}, format="json")
    assert response.status_code == 200 and Lorebook.objects.get(pk=theirs.pk).scope == "global"


def test_a_groups_members_each_get_their_own_book(api, user):
    mira, rowan = CharacterFactory(user=user, name="Mira"), CharacterFactory(user=user, name="Rowan")
    group = chat_create(user=user, title="The crew", character_ids=[mira.pk, rowan.pk])
    books = [
        {"name": "Mira lore", "data": _book("Mira keeps the lantern."), "use": "character", "characters": ["Mira"]},
        {"name": "Shared", "data": _book("Both sail."), "use": "character", "characters": ["Rowan", "Nobody here"]},
    ]
    response = api.post(f"/api/v1/chats/{group.pk}/lorebooks", {"books": books}, format="json")
    assert response.status_code == 200, response.json()
    linked = {c.name: c.card_data["extensions"]["world"] for c in Character.objects.filter(pk__in=[mira.pk, rowan.pk])}
    assert linked == {"Mira": "Mira lore", "Rowan": "Shared"}
    for character, name in ((mira, "Mira lore"), (rowan, "Shared")):
        scanned, _ = chat_books(user=user, chat=group, character=Character.objects.get(pk=character.pk))
        assert [(book.name, book.kind) for book in scanned] == [(name, "character")]


@pytest.mark.parametrize("characters", ["Mira", [None], ["M" * 201], ["x"] * 101])
def test_a_bad_list_of_characters_is_refused_naming_it(api, user, chat, characters):
    books = [{"name": "Mira lore", "data": _book("x"), "use": "character", "characters": characters}]
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": books}, format="json")
    assert response.status_code == 400 and "characters" in response.content.decode(), response.content
    assert not Lorebook.objects.exists()


def test_a_characters_additional_books_are_scanned_after_its_own_as_sillytavern_reads_them(api, user, chat):
    """SillyTavern's character lore is the card's book, then the character's Additional Lorebooks; a book already
    read as global or as the chat's lore is not read again as the character's."""
    books = [
        {"name": "Mira's lore", "data": _book("From the card's book."), "use": "character"},
        {"name": "Harbour", "data": _book("From an additional book."), "use": "extra"},
        {"name": "World", "data": _book("From everywhere."), "use": "global"},
        {"name": "Chat lore", "data": _book("From the chat."), "use": "chat"},
    ]
    extra = [{"character": "Mira", "books": ["Harbour", " World", "Chat lore", "Harbour", "Missing"]}]
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", {"books": books, "extra_books": extra}, format="json")
    assert response.status_code == 200, response.json()
    assert [row["use"] for row in response.json()] == ["character", "extra", "global", "chat"]
    mira = Character.objects.get(pk=chat.characters.first().pk)
    assert mira.extra_books == ["Harbour", "World", "Chat lore", "Missing"]  # trimmed, a repeat left out
    assert mira.card_data["extensions"]["world"] == "Mira's lore"  # the card's own link is untouched
    assert Lorebook.objects.get(user=user, name="Harbour").scope == "linked"
    scanned, problems = chat_books(user=user, chat=chat, character=mira)
    assert [(book.name, book.kind) for book in scanned] == [
        ("World", "global"), ("Chat lore", "chat"), ("Mira's lore", "character"), ("Harbour", "character"),
    ]  # fmt: skip
    assert problems == ["The character links the lorebook 'Missing', which you have not imported."]


def test_an_additional_book_taken_off_in_sillytavern_is_taken_off_here(api, user, chat):
    url = f"/api/v1/chats/{chat.pk}/lorebooks"
    books = [{"name": name, "data": _book(name), "use": "extra"} for name in ("Harbour", "Sea")]
    api.post(url, {"books": books, "extra_books": [{"character": "Mira", "books": ["Harbour", "Sea"]}]}, format="json")
    mira = Character.objects.get(pk=chat.characters.first().pk)
    clock = mira.clock
    response = api.post(url, {"books": [], "extra_books": [{"character": "Mira", "books": ["Sea"]}]}, format="json")
    assert response.status_code == 200
    mira.refresh_from_db()
    assert mira.extra_books == ["Sea"] and mira.clock != clock  # a change devices pull
    assert [book.name for book in chat_books(user=user, chat=chat, character=mira)[0]] == ["Sea"]
    api.post(url, {"books": [], "extra_books": [{"character": "Mira", "books": []}]}, format="json")
    mira.refresh_from_db()
    assert mira.extra_books == [] and Lorebook.objects.filter(user=user, name="Sea").exists()  # the book stays


def test_a_card_book_is_read_before_the_additional_books(user):
    card = {"spec": "chara_card_v2", "data": {"name": "Ash", "character_book": {"name": "Ash's own", "entries": [
        {"id": 1, "keys": ["ember"], "content": "Ash tends the fire.", "enabled": True, "insertion_order": 10},
    ]}}}  # fmt: skip
    ash = CharacterFactory(user=user, name="Ash", card_data=card, extra_books=["Sea"])
    lorebook_import(user=user, name="Sea", data=_book("The sea."))
    scanned, problems = chat_books(user=user, chat=None, character=ash)
    assert [(book.name, book.kind, book.card) for book in scanned] == [
        ("Ash's own", "character", True), ("Sea", "character", False),
    ] and problems == []  # fmt: skip


@pytest.mark.parametrize(
    ("extra_books", "problem"),
    [
        ("Mira", "extra_books"),
        ([{"character": "Mira"}], "books"),
        ([{"character": "Mira", "books": "Sea"}], "books"),
        ([{"character": "Mira", "books": ["S" * 201]}], "books"),
        ([{"character": "Mira", "books": ["x"] * 51}], "books"),
        ([{"character": None, "books": []}], "character"),
        ([{"character": "Mira", "books": []}] * 101, "extra_books"),
    ],
)
def test_a_bad_list_of_additional_books_is_refused_naming_it_and_changes_nothing(
    api, user, chat, extra_books, problem
):
    books = [{"name": "Sea", "data": _book("x"), "use": "extra"}]
    body = {"books": books, "extra_books": extra_books}
    response = api.post(f"/api/v1/chats/{chat.pk}/lorebooks", body, format="json")
    assert response.status_code == 400 and problem in response.content.decode(), response.content
    assert not Lorebook.objects.exists()
    assert Character.objects.get(pk=chat.characters.first().pk).extra_books == []


def test_another_users_character_keeps_its_additional_books(api, other_user, chat):
    theirs = CharacterFactory(user=other_user, name="Mira", extra_books=["Theirs"])
    body = {"books": [], "extra_books": [{"character": "Mira", "books": ["Mine"]}]}
    assert api.post(f"/api/v1/chats/{chat.pk}/lorebooks", body, format="json").status_code == 200
    theirs.refresh_from_db()
    assert theirs.extra_books == ["Theirs"]
    assert Character.objects.get(pk=chat.characters.first().pk).extra_books == ["Mine"]
