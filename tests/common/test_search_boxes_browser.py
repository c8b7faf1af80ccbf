"""The search boxes of the list pages (chats, characters, entities, memories) in Chromium, as a person types into
them: the results box is replaced by the answer, never nested inside itself (each search used to add one more box
with the same id), and the results are the ones searched for."""

from __future__ import annotations

import pytest

from apps.chats.services.chats import chat_create
from apps.memories.services.memories import memory_create
from tests.browsers import session_cookie, watched_page
from tests.chats.factories import CharacterFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.mark.parametrize(
    ("path", "box", "results"),
    [
        ("/chats/", "input[name=q]", "#chat-results"),
        ("/characters/", "input[name=q]", "#character-results"),
        ("/memories/entities/", "#entity-q", "#entity-results"),
        ("/memories/", "#memory-q", "#memory-results"),
    ],
)
def test_each_search_replaces_its_results_box(browser, live_server, client, user, path, box, results):
    for name in ("Mira", "Corvin"):
        character = CharacterFactory(user=user, name=name)
        chat_create(user=user, title=f"{name}'s harbour", character_ids=[character.pk])
        memory_create(user=user, character=character, kind="fact", content=f"{name} keeps a ledger.",
                      entities=[{"name": name}])  # fmt: skip
    page = watched_page(browser, 1280, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}{path}")
    for query in ("Mira", "Corvin", "Mira"):
        page.locator(box).fill("")
        with page.expect_response(lambda response: "q=" in response.url):
            page.locator(box).press_sequentially(query)
        page.wait_for_timeout(600)  # past the box's delay: the last keystroke's answer is in
        assert page.locator(results).count() == 1, f"{path}: a results box inside the results box"
        text = page.locator(results).inner_text()
        other = "Corvin" if query == "Mira" else "Mira"
        assert query in text and other not in text, f"{path}: searched {query!r}, shown: {text[:200]!r}"
    assert page.errors == []
