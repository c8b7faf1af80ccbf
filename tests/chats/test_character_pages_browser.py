"""The character, group-chat and persona pages in a real headless Chromium (Debian's package, through Playwright) at a
phone's width, 390 px: nothing wider than the screen, and a chat started from each page. Screenshots are kept in
var/test-artifacts/ (characters-390.png, character-390.png, personas-390.png)."""

from __future__ import annotations

import base64
import io
import json

import pytest
from django.conf import settings
from django.db import connections

from apps.chats.models import Chat
from apps.chats.selectors import chat_characters_in_order
from apps.chats.services.cards import character_import_card
from apps.chats.services.personas import persona_create
from apps.chats.services.png import png_with_card
from tests.browsers import chromium, screenshot
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import image_bytes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTH = 390


@pytest.fixture
def phone(monkeypatch, live_server, client, user, media):
    """A signed-in page 390 px wide."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    with chromium() as browser:
        context = browser.new_context(viewport={"width": WIDTH, "height": 844})
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
        yield context.new_page()
        context.close()
        # The test's ORM calls ran under Playwright's greenlet, whose context holds a connection of its own:
        # closed there, or the test database could not be dropped at the end.
        connections.close_all()


def fits(page, name: str) -> None:
    screenshot(page, f"{name}-{WIDTH}")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, f"{name} is wider than the screen"


def test_pages_fit_a_phone_and_start_chats(phone, live_server, user):
    from playwright.sync_api import expect

    card = base64.b64encode(json.dumps({"data": {"name": "Seraphina", "first_mes": "Hello, {{user}}."}}).encode())
    seraphina = character_import_card(user=user, stream=io.BytesIO(png_with_card(image_bytes("PNG", (40, 60)), card)))
    bram = CharacterFactory(user=user, name="Bram of the very long name and title", first_mes="Bram nods.")
    ash = persona_create(user=user, name="Ash", description="A wanderer with a lantern.", is_default=True)

    phone.goto(f"{live_server.url}/characters/")
    fits(phone, "characters")
    phone.check(f"input[name=characters][value='{bram.pk}']")
    phone.check(f"input[name=characters][value='{seraphina.pk}']")
    phone.select_option("#group-chat select[name=reply_order]", "manual")
    phone.click("text=Start group chat")
    phone.wait_for_url(f"{live_server.url}/chats/*/")
    group = Chat.objects.get(user=user, reply_order="manual")
    assert chat_characters_in_order(chat=group) == [bram, seraphina] and group.persona == ash
    # The order is changed afterwards in the group's chat panel, as a person picks it there; the composer's
    # default choice follows at once, without a reload.
    default = phone.locator('#composer select[name=character] option[value=""]')
    assert default.text_content() == "(choose)"
    phone.click("details[data-panel=chat] > summary")
    phone.locator(".chat-reply-order select[name=reply_order]").select_option("natural")
    phone.locator(".chat-reply-order .saved").wait_for()
    assert Chat.objects.get(pk=group.pk).reply_order == "natural"
    expect(default).to_have_text("Natural order")
    fits(phone, "group-chat-panel")
    phone.set_viewport_size({"width": 1280, "height": 900})
    screenshot(phone, "group-chat-panel-1280")
    phone.set_viewport_size({"width": WIDTH, "height": 844})

    phone.goto(f"{live_server.url}/characters/{seraphina.pk}/")
    fits(phone, "character")
    phone.click("button:has-text('New chat')")
    phone.wait_for_url(f"{live_server.url}/chats/*/")
    assert "Hello, Ash." in phone.content()

    phone.goto(f"{live_server.url}/personas/")
    fits(phone, "personas")
