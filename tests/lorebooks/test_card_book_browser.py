"""A card's embedded lorebook imported as a person does it, in a real headless Chromium at a phone's and a desktop's
width: the character's page offers it, one press makes it a book of theirs, and the book's page lists its entries.
Screenshots in var/test-artifacts/card-book/."""

from __future__ import annotations

import pytest

from apps.lorebooks.models import Lorebook
from tests.browsers import screenshot, session_cookie, watched_page
from tests.chats.factories import CharacterFactory
from tests.lorebooks.test_card_book import CARD_BOOK

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.mark.parametrize("width", [390, 1280])
def test_a_person_imports_a_cards_lorebook_from_its_page(browser, live_server, client, user, width):
    card = {"spec": "chara_card_v2", "data": {"name": "Mira", "character_book": CARD_BOOK}}
    mira = CharacterFactory(user=user, name="Mira", card_data=card)
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/characters/{mira.pk}/")
    offer = page.locator("form.card-book")
    assert "carries a lorebook, “Mira's book”, of 2 entries" in offer.inner_text()
    screenshot(page, f"character-{width}", "card-book")
    offer.get_by_role("button", name="Import its lorebook").click()
    page.wait_for_load_state()
    book = Lorebook.objects.get(user=user)
    assert page.url == f"{live_server.url}/lorebooks/{book.pk}/"
    assert "Imported the card's lorebook as “Mira's book” (2 entries)" in page.content()
    assert page.locator("table.lore-entries tbody tr").count() == 2
    screenshot(page, f"book-{width}", "card-book")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []
