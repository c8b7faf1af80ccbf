"""The character editor in a real headless Chromium at a desktop's and a phone's width: each alternate greeting in a
box of its own with an empty one for the next, the post-history instructions, and nothing wider than the screen.
Screenshots in var/test-artifacts/ (character-editor-1280.png, character-editor-390.png)."""

from __future__ import annotations

import pytest

from apps.chats.services.characters import character_create
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.mark.parametrize("width", [1280, 390])
def test_the_editor_shows_a_box_per_greeting_and_saves_a_new_one(browser, live_server, client, user, width):
    mira = character_create(
        user=user,
        name="Mira",
        first_mes="*Mira trims the lantern's wick.* Evening, {{user}}.",
        alternate_greetings=["*The bell rings twice.* You're late, {{user}}."],
        post_history_instructions="Write one or two paragraphs; never speak for {{user}}.",
        description="Keeper of the lighthouse.\nSpeaks little.",
        mes_example="<START>\n{{char}}: The wick again.\n{{user}}: Again.",
    )
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/characters/{mira.pk}/")
    boxes = page.locator("textarea[name=alternate_greetings]")
    assert boxes.count() == 2 and boxes.nth(1).input_value() == ""
    boxes.nth(1).fill("*Rain on the glass.* Come in, quick.")
    page.locator("form.stacked button[type=submit]").click()
    page.wait_for_load_state()
    assert page.locator("textarea[name=alternate_greetings]").count() == 3
    # The boxes the person did not touch are kept as they were: the browser sends their lines ended "\r\n".
    mira.refresh_from_db()
    assert (mira.description, mira.mes_example) == (
        "Keeper of the lighthouse.\nSpeaks little.", "<START>\n{{char}}: The wick again.\n{{user}}: Again."
    )  # fmt: skip
    screenshot(page, f"character-editor-{width}")
    assert page.locator("textarea[name=post_history_instructions]").input_value().startswith("Write one or two")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_types_a_characters_additional_lorebooks_and_a_bad_list_is_refused(
    browser, live_server, client, user, width
):
    mira = character_create(user=user, name="Mira", extra_books=["Harbour"])
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/characters/{mira.pk}/")
    books = page.get_by_label("Additional lorebooks")
    assert books.input_value() == "Harbour"
    books.fill("Harbour\n  Sea lore \n\nHarbour\n")
    page.locator("form.stacked button[type=submit]").click()
    page.wait_for_load_state()
    mira.refresh_from_db()
    assert mira.extra_books == ["Harbour", "Sea lore"]
    assert page.get_by_label("Additional lorebooks").input_value() == "Harbour\nSea lore"
    screenshot(page, f"character-extra-books-{width}")
    page.get_by_label("Additional lorebooks").fill("x" * 201)
    page.locator("form.stacked button[type=submit]").click()
    page.wait_for_load_state()
    assert "at most 200 characters" in page.locator("form.stacked").inner_text()
    mira.refresh_from_db()
    assert mira.extra_books == ["Harbour", "Sea lore"]  # unchanged
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []
