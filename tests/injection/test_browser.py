"""The recall card in a real headless Chromium (Debian's package, driven by Playwright; never a downloaded
browser): read it, draw its subgraph and open a node, edit its text, re-run it and delete it, each through the
page's htmx, with the chat's integrity kept in step for the page's other writes. A screenshot of the card is kept
in var/test-artifacts/recall-card.png."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connections

from apps.accounts.services import settings_document_get
from apps.chats.models import Chat, Message
from apps.injection.services.context import context_build
from apps.injection.services.recall import recall_stored
from apps.injection.services.settings import injection_settings_save
from tests.browsers import ARTIFACTS, chromium
from tests.injection.helpers import ASK, DOG, say

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture
def page(monkeypatch, live_server, client, user):
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client.force_login(user)
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1100, "height": 1400})
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
        yield context.new_page()
        context.close()
        # The test's ORM calls ran under Playwright's greenlet, whose context holds a connection of its own (Django's
        # connections are per context): closed here, or the test database could not be dropped at the end.
        connections.close_all()


def stored(chat) -> dict | None:
    return recall_stored(Message.objects.get(chat=chat, index=1))


def test_a_recall_card_is_read_drawn_edited_re_run_and_deleted_in_a_browser(
    page, live_server, user, story, character, remember, scripted
):
    from playwright.sync_api import expect

    # The long-term slot off: the fact is the turn's to recall, not a standing memory of that slot.
    injection_settings_save(
        user=user, values={"slots": {"long": {"enabled": False}}}, integrity=settings_document_get(user=user).integrity
    )
    remember("fact", DOG, character=character, importance=1, entities=[{"name": "Biscuit", "type": "animal"}])
    say(story, ("Mira", "Welcome back."), ("Rowan", ASK))
    context_build(user=user, chat=story, message=ASK)
    page.goto(f"{live_server.url}/chats/{story.pk}/")

    card = page.locator("#recall-slot-1 details.recall-card")
    card.locator("> summary").click()
    expect(card.locator(".recall-text")).to_contain_text(DOG)

    card.get_by_role("button", name="Show the graph").click()
    expect(page.locator("#recall-graph-1 svg circle")).to_have_count(2)
    page.locator("#recall-graph-1 g.node-entity").click()
    expect(page.locator("#recall-node-1 .node-details")).to_contain_text("Biscuit")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    card.screenshot(path=str(ARTIFACTS / "recall-card.png"), caret="initial")
    assert (ARTIFACTS / "recall-card.png").stat().st_size > 1000

    card.locator("details.recall-edit summary").click()
    card.locator("textarea[name=injection_text]").fill("Biscuit is a grey lurcher.")
    card.get_by_role("button", name="Save the text").click()
    expect(page.locator("#recall-slot-1 .recall-text")).to_have_text("Biscuit is a grey lurcher.")
    expect(page.locator("#recall-slot-1 details.recall-card > summary")).to_contain_text("edited")
    assert stored(story)["manuallyEdited"] is True
    # The page learnt the chat's new integrity: its next write (this re-run, the editor's) is not a conflict.
    expect(page.locator("#messages")).to_have_attribute("data-integrity", str(Chat.objects.get(pk=story.pk).integrity))

    page.locator("#recall-slot-1").get_by_role("button", name="Re-run recall").click()
    expect(page.locator("#recall-slot-1 .recall-text")).to_contain_text(DOG)
    assert stored(story)["manuallyEdited"] is False and stored(story)["hookName"] == "rerun"

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#recall-slot-1").get_by_role("button", name="Delete").click()
    expect(page.locator("#recall-slot-1")).to_contain_text("Recall memories for this message")
    assert stored(story) is None
    expect(page.locator("#messages")).to_have_attribute("data-integrity", str(Chat.objects.get(pk=story.pk).integrity))
