"""Lorebook entries beside memories on the memories page (docs/LOREBOOKS.md, "On the memories page"): the books of
the page's scope searched with memory search's relevance, marked as lorebook entries, linked to their form (or to
the character, for a card's book); nothing when nothing is near; another user's books never."""

from __future__ import annotations

import pytest

from apps.chats.services.chats import chat_create
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_import
from apps.lorebooks.services.search import lorebook_entries_search
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

FERRY = {"uid": 3, "key": ["ferry"], "comment": "The ferry",
         "content": "The fare is two silver coins, three after dark."}  # fmt: skip
BELL = {"uid": 4, "key": ["bell"], "comment": "The bell", "content": "The chapel bell rings twice for a storm."}
CARD_BOOK = {"name": "Mira's notes", "entries": [
    {"id": 0, "keys": ["lantern"], "content": "Mira's lantern burns whale oil.", "enabled": True,
     "insertion_order": 1},
]}  # fmt: skip


@pytest.fixture
def mira(user):
    book = lorebook_import(user=user, name="Harbour", data={"entries": {"3": FERRY, "4": BELL}})
    Lorebook.objects.filter(pk=book.pk).update(scope=Lorebook.Scope.GLOBAL)
    lorebook_import(user=user, name="Elsewhere", data={"entries": {"0": {"uid": 0, "content": "Far ferry lands."}}})
    card = {"spec": "chara_card_v2", "data": {"name": "Mira", "character_book": CARD_BOOK}}
    return CharacterFactory(user=user, name="Mira", card_data=card)


def test_a_characters_books_are_searched_by_relevance(user, mira):
    found = lorebook_entries_search(user=user, query="How much is the ferry fare?", character_id=mira.pk)
    assert [(hit.book, hit.uid) for hit in found.hits] == [("Harbour", 3)]  # the linked-nowhere book is not its
    assert found.searched == 3 and found.by_meaning
    lantern = lorebook_entries_search(user=user, query="What does the lantern burn?", character_id=mira.pk).hits
    assert [(hit.book, hit.lorebook_id, hit.character_id) for hit in lantern] == [("Mira's notes", None, mira.pk)]
    assert lorebook_entries_search(user=user, query="I like apples.", character_id=mira.pk).hits == []


def test_the_page_of_all_memories_searches_every_book(user, mira):
    found = lorebook_entries_search(user=user, query="ferry")
    assert {hit.book for hit in found.hits} == {"Harbour", "Elsewhere"}


def test_a_chat_searches_the_book_it_links(user, mira):
    chat = chat_create(user=user, title="Crossing", character_ids=[mira.pk])
    chat.chat_metadata = {"world_info": "Elsewhere"}
    chat.save(update_fields=["chat_metadata"])
    found = lorebook_entries_search(user=user, query="ferry lands", chat_id=chat.pk)
    assert ("Elsewhere", 0) in [(hit.book, hit.uid) for hit in found.hits]


def test_the_memories_page_loads_the_entries_beside_its_results(web, user, mira):
    page = web.get(f"/characters/{mira.pk}/memories/?q=ferry+fare").content.decode()
    assert f'hx-get="/lorebooks/search/?q=ferry%20fare&amp;character={mira.pk}"' in page
    hits = web.get(f"/lorebooks/search/?q=ferry+fare&character={mira.pk}").content.decode()
    assert "In your lorebooks" in hits and "Lorebook" in hits and "The fare is two silver coins" in hits
    assert f'href="/lorebooks/{Lorebook.objects.get(name="Harbour").pk}/entries/3/"' in hits
    assert "No lorebook entry matches" in web.get(f"/lorebooks/search/?q=apples&character={mira.pk}").content.decode()


def test_another_users_books_are_never_found(client, other_user, user, mira):
    client.force_login(other_user)
    assert "fare" not in client.get("/lorebooks/search/?q=ferry+fare").content.decode()
    assert client.get(f"/lorebooks/search/?q=ferry&character={mira.pk}").status_code == 404
    assert client.get("/lorebooks/search/?q=ferry&character=x").status_code == 404


def test_a_cards_book_named_like_a_lorebook_is_searched_and_linked_to_its_character(web, user, mira):
    lorebook_import(user=user, name="Mira's notes", data={"entries": {"0": {"uid": 0, "content": "Oil lamps."}}})
    Lorebook.objects.filter(name="Mira's notes").update(scope=Lorebook.Scope.GLOBAL)
    hits = lorebook_entries_search(user=user, query="lantern whale oil", character_id=mira.pk).hits
    card = next(hit for hit in hits if hit.character_id == mira.pk)
    assert card.lorebook_id is None and card.excerpt.startswith("Mira's lantern")
    assert any(hit.lorebook_id for hit in hits if hit.book == "Mira's notes")


def test_an_id_that_is_not_ascii_digits_is_a_404(web, mira):
    for query in ("chat=²", "character=٣", "chat=1&character=1"):
        assert web.get(f"/lorebooks/search/?q=x&{query}").status_code == 404, query
        assert web.get(f"/lorebooks/from-memories/?{query}").status_code == 404, query
