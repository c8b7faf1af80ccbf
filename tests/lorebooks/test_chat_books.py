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
