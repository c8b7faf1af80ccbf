"""A card's embedded lorebook imported from its character's page, as SillyTavern offers when it imports such a
card: a book of the person's with the card's entries, linked by the card, read by its chats from then on (an edit
on the Lorebooks page reaches the prompt); a name taken gets a number, and another person's character is a 404."""

from __future__ import annotations

import json

import pytest

from apps.chats.models import Character
from apps.chats.services.characters import card_extensions
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import entry_save, lorebook_import
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

CARD_BOOK = {"name": "Mira's book", "entries": [
    {"keys": ["lantern"], "content": "The lantern is older than the town.", "insertion_order": 5, "enabled": True,
     "position": "after_char", "extensions": {}, "id": 0},
    {"keys": ["fog horn"], "content": "The fog horn sounds at dusk.", "enabled": True, "extensions": {}, "id": 1},
]}  # fmt: skip


@pytest.fixture
def mira(user):
    card = {"spec": "chara_card_v2", "data": {"name": "Mira", "character_book": CARD_BOOK, "extensions": {"fav": 1}}}
    return CharacterFactory(user=user, name="Mira", description="Keeps the lantern.", card_data=card)


def test_a_cards_book_is_offered_imported_linked_and_read_by_its_chats(web, api, user, mira, llm):
    page = web.get(f"/characters/{mira.pk}/").content.decode()
    assert "Its card carries a lorebook, “Mira&#x27;s book”, of 2 entries" in page

    response = web.post(f"/lorebooks/from-card/{mira.pk}/")

    book = Lorebook.objects.get(user=user)
    assert response.status_code == 302 and response["Location"] == f"/lorebooks/{book.pk}/"
    assert book.name == "Mira's book"
    entries = {entry.data["uid"]: entry.data for entry in book.entries.all()}
    assert entries[0]["key"] == ["lantern"] and entries[0]["content"] == "The lantern is older than the town."
    assert entries[1]["key"] == ["fog horn"]
    mira = Character.objects.get(pk=mira.pk)
    assert card_extensions(mira.card_data) == {"fav": 1, "world": "Mira's book"}
    assert mira.card_data["data"]["character_book"] == CARD_BOOK  # the card keeps its own copy, as SillyTavern's
    notice = web.get(response["Location"]).content.decode()  # the notice, shown once
    assert "Imported the card&#x27;s lorebook as “Mira&#x27;s book” (2 entries)" in notice
    assert "Its card carries a lorebook" not in web.get(f"/characters/{mira.pk}/").content.decode()

    # Its chats read the imported book: an edit there reaches the prompt.
    entry_save(book=book, uid=0, changes={"content": "EDITED: the lantern came from the old town."})
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk], user_name="Rowan")
    chat = chat_append(chat=chat, messages=[{"name": "Mira", "mes": "Hello."}], integrity=chat.integrity).chat
    answer = api.post(f"/api/v1/chats/{chat.pk}/generate", {"stream": False, "message": "The lantern?"}, format="json")
    assert answer.status_code == 200, answer.content
    sent = json.dumps(llm.server.requests[-1]["body"]["messages"])
    assert "EDITED: the lantern came from the old town." in sent and "older than the town" not in sent


def test_a_name_taken_gets_a_number(web, user, mira):
    lorebook_import(user=user, name="Mira's book", data={"entries": {}})
    web.post(f"/lorebooks/from-card/{mira.pk}/")
    assert sorted(Lorebook.objects.filter(user=user).values_list("name", flat=True)) == [
        "Mira's book", "Mira's book (2)"
    ]  # fmt: skip
    assert card_extensions(Character.objects.get(pk=mira.pk).card_data)["world"] == "Mira's book (2)"


def test_another_persons_character_is_a_404_and_a_card_without_a_book_imports_nothing(web, user, other_user, mira):
    theirs = CharacterFactory(user=other_user, name="Bram", card_data=mira.card_data)
    assert web.post(f"/lorebooks/from-card/{theirs.pk}/").status_code == 404
    plain = CharacterFactory(user=user, name="Sera")
    response = web.post(f"/lorebooks/from-card/{plain.pk}/", follow=True)
    assert (
        "Nothing was imported: This character&#x27;s card carries no lorebook to import." in response.content.decode()
    )
    assert not Lorebook.objects.exists() and Character.objects.get(pk=theirs.pk).card_data == mira.card_data


def test_a_book_name_no_book_may_hold_is_made_one_and_numbered_when_taken(web, user, mira):
    card = {
        **mira.card_data,
        "data": {**mira.card_data["data"], "character_book": {**CARD_BOOK, "name": "Sea/Old.json"}},
    }
    Character.objects.filter(pk=mira.pk).update(card_data=card)
    lorebook_import(user=user, name="Sea-Old", data={"entries": {}})
    web.post(f"/lorebooks/from-card/{mira.pk}/")
    assert sorted(Lorebook.objects.filter(user=user).values_list("name", flat=True)) == ["Sea-Old", "Sea-Old (2)"]
