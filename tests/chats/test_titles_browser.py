"""Default chat titles in a real headless Chromium at a desktop's and a phone's width, read from Berlin in British
English: a chat Lorekeeper started shows its moment in the reader's zone, an imported one as its file name says,
on the chat list and the chat page. Screenshots in var/test-artifacts/ (titles-chats-<width>.png,
titles-chat-<width>.png)."""

from __future__ import annotations

from datetime import UTC
from zoneinfo import ZoneInfo

import pytest

from apps.chats.services.chats import chat_create
from apps.chats.services.start import chat_start
from apps.chats.titles import file_name_title, moment_shown
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

IMPORTED = "Mira - 2026-11-23@14h49m06s448ms"


@pytest.mark.parametrize("width", [1280, 390])
def test_default_titles_read_as_names_and_the_minute(browser, live_server, client, user, character, width):
    chat_create(user=user, title=IMPORTED, character_ids=[character.pk])
    started = chat_start(user=user, characters=[character])
    moment = file_name_title(started.title).moment.replace(tzinfo=UTC).astimezone(ZoneInfo("Europe/Berlin"))
    page = watched_page(
        browser, width, live_server, session_cookie(client, user), locale="en-GB", timezone_id="Europe/Berlin"
    )

    page.goto(f"{live_server.url}/chats/")
    titles = page.locator("td[data-label=Title] a").all_inner_texts()
    assert sorted(titles) == sorted(["Mira, 23 Nov 2026, 14:49", f"{character.name}, {moment_shown(moment)}"])
    screenshot(page, f"titles-chats-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    page.goto(f"{live_server.url}/chats/{started.pk}/")
    assert page.locator("h1").first.inner_text() == f"{character.name}, {moment_shown(moment)}"
    screenshot(page, f"titles-chat-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.errors == []
