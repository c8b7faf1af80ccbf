"""The chat page puts the conversation first, in a real headless Chromium against the production server (gunicorn,
one uvicorn worker), the reply streamed by the scripted model: after a 3,000-message import the page opens on the
newest message with the notice of what waits for Run in view; after a send the end of the streaming reply is in view
above the composer; swiping right past the last reply's last swipe writes a new swipe; the panels keep whether they
were open; and on a phone every control a person taps in the chat is at least 44 × 44 px. Screenshots in
var/test-artifacts/chat-layout/."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connections

from apps.chats.models import Message
from apps.chats.services.chats import chat_import
from apps.chats.services.start import chat_start
from apps.llm.services import connection_create
from tests.browsers import BROKEN_WORDS, chromium, screenshot
from tests.chats.factories import CharacterFactory
from tests.llm_server import Reply
from tests.servers import gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PASSWORD = "correct horse battery"  # the `user` fixture's
FOLDER = "chat-layout"
LONG = " ".join(f"The tide came in, wave {i}, over the harbour wall." for i in range(60))
TAPPED = (
    "#messages .swipe-nav button, #messages .message-menu > summary, #messages .recall-card > summary, "
    "#messages .recall-make button, #composer button, #composer summary, .chat-side summary, .chat-place button"
)


def _file(count: int) -> bytes:
    """A SillyTavern chat of `count` messages."""
    header = {"user_name": "Rowan", "character_name": "Mira", "create_date": "2026-11-23@14h49m06s"}
    lines = [json.dumps({**header, "chat_metadata": {}})]
    for i in range(count):
        lines.append(json.dumps({
            "name": "Rowan" if i % 2 else "Mira", "is_user": bool(i % 2), "is_system": False,
            "send_date": "2026-11-23T14:49:06.000Z", "mes": f"Line {i} of the harbour story, the ledger open.",
        }))  # fmt: skip
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def site(monkeypatch, user, llm_server, broker):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    user.save(update_fields=["password"])
    mira = CharacterFactory(user=user, name="Mira", first_mes="Evening, {{user}}. Storm's coming. " * 4)
    connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="scripted-model", api_key="sk-" + "x" * 20,
        is_default=True, reply_tokens=1200,  # the long reply (about 800 tokens) is not cut at its length
    )  # fmt: skip
    with gunicorn(broker=broker, workers=1, asgi=True, pages=True, LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:
        yield url.replace("127.0.0.1", "localhost"), mira


def _page(browser, base: str, user, width: int, height: int):
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()
    return page


IN_VIEW = """([selector, whole]) => {
    const node = document.querySelector(selector);
    if (!node) return false;
    const box = node.getBoundingClientRect();
    // Not under the sticky bottom of the screen (the notice and the composer), unless it is part of it.
    const bottom = document.querySelector('.chat-bottom').getBoundingClientRect();
    const floor = node.closest('.chat-bottom') ? innerHeight : bottom.top;
    const end = box.bottom > 0 && box.bottom <= Math.min(innerHeight, floor + 1);
    return box.height > 0 && end && (!whole || box.top >= 0);
}"""


def _in_view(page, selector: str, *, whole: bool = True) -> bool:
    """Inside the viewport (wholly, or its end only) and not covered by the bottom of the screen, within the page's
    own time to settle (what loads after it: the composer, the notice)."""
    try:
        page.wait_for_function(IN_VIEW, arg=[selector, whole], timeout=10000)
    except Exception:  # noqa: BLE001 — Playwright's TimeoutError: answered as False, with the assert's message
        return False
    return True


# Each message's id, and how far below the top of its name the bottom of its menu's button is, in px.
# How far below its name's box each message's menu, and a lone › shown, begin: on the name's line it is below 0.
BELOW_NAME = """() => [...document.querySelectorAll(
        'article.message header .message-menu, article.message header .swipe-nav.single')]
    .filter((node) => node.offsetParent !== null)
    .map((node) => [node.closest('article').id + ' ' + node.className,
                    node.getBoundingClientRect().top
                        - node.closest('header').querySelector('.name').getBoundingClientRect().bottom])"""


# About a minute (a 3,000-message import, a streamed reply, two widths): marked slow to keep make test within its
# 10 minutes; .ci/run runs it after make test.
@pytest.mark.slow
def test_the_conversation_and_what_waits_for_the_person_are_in_view(site, user, llm_server):
    from playwright.sync_api import expect

    base, mira = site
    imported = chat_import(user=user, stream=io.BytesIO(_file(3000)), filename="Mira.jsonl", character_ids=[mira.pk])
    llm_server.on("Tell me about the sea", Reply(LONG, tokens_per_second=12))
    llm_server.on("Tell me more", "Gulls over the breakwater.")
    with chromium() as browser:
        page = _page(browser, base, user, 1280, 900)
        page.goto(f"{base}/chats/{imported.pk}/")
        notice = page.locator("#chat-decision .consent")
        expect(notice).to_contain_text("3,000 messages are waiting")
        expect(notice).to_contain_text("model calls")
        page.wait_for_function("() => document.querySelector('#composer textarea')")
        assert _in_view(page, "#m2999"), "the newest message is out of view"
        assert _in_view(page, "#chat-decision .consent button[type=submit]")
        screenshot(page, "import-1280", FOLDER)

        # A new chat: the person's message and the reply as it streams stay in view above the composer.
        chat = chat_start(user=user, characters=[mira])
        page.goto(f"{base}/chats/{chat.pk}/")
        page.fill("#composer-text", "Tell me about the sea.")
        page.press("#composer-text", "Enter")
        streaming = page.locator("article.message.streaming .text")
        expect(streaming).to_contain_text("wave 3", timeout=20000)
        assert _in_view(page, "article.message.streaming .text", whole=False), (
            "the streaming reply's end is out of view"
        )
        screenshot(page, "stream-1280", FOLDER)
        expect(page.locator("#m2 .text")).to_contain_text("wave 59", timeout=60000)
        assert _in_view(page, "#m2", whole=False)

        # Swiping right past the last reply's last swipe writes a new swipe, as SillyTavern does.
        llm_server.on("Tell me about the sea", "The sea is grey tonight.")
        page.locator("#m2 .swipe-new").click()
        expect(page.locator("#m2 .text")).to_contain_text("The sea is grey tonight.")
        expect(page.locator("#m2")).to_contain_text("swipe 2 of 2")
        assert Message.objects.get(chat=chat, index=2).swipes[1] == "The sea is grey tonight."
        expect(page.locator("#m0 .swipe-new")).to_be_hidden()  # on the last reply only

        # The panels keep whether they were open.
        page.locator(".chat-panel[data-panel=extraction] > summary").click()
        expect(page.locator("#pipeline")).to_be_visible()
        page.reload()
        expect(page.locator("#pipeline")).to_be_visible()
        expect(page.locator(".chat-panel[data-panel=metadata] textarea")).to_be_hidden()
        assert page.errors == []

        phone = _page(browser, base, user, 390, 844)
        phone.goto(f"{base}/chats/{chat.pk}/")
        expect(phone.locator("#composer-text")).to_be_visible()
        phone.locator("#m2 .message-menu > summary").click()
        expect(phone.locator("#m2 .menu-items .edit-message")).to_be_visible()
        small = phone.evaluate(
            """(selector) => [...document.querySelectorAll(selector + ', details[open] > .menu-items > *')]
                .filter((node) => node.offsetParent !== null && getComputedStyle(node).visibility !== 'hidden')
                .map((node) => [node.closest('[id]')?.id + ' ' + node.textContent.trim().slice(0, 30),
                                node.getBoundingClientRect().width, node.getBoundingClientRect().height])
                .filter(([, width, height]) => width < 43.5 || height < 43.5)""",
            TAPPED,
        )
        assert small == [], small
        counted = phone.locator(TAPPED).count()
        assert counted >= 8, counted
        screenshot(phone, "menu-390", FOLDER)
        phone.keyboard.press("Escape")
        expect(phone.locator("#m2 .menu-items")).to_be_hidden()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        # Each message's menu stays on its name's line (a new chat's greeting, its › shown, pushed it onto a line
        # of its own; so did a long name, or a name and a date that filled the line). A greeting's lone › stays
        # on that line too.
        long_named = CharacterFactory(
            user=user, name="Captain Evangeline Harrowgate of the Northern Reach", first_mes="Well met, {{user}}."
        )
        shown_chats = (chat, chat_start(user=user, characters=[mira]), chat_start(user=user, characters=[long_named]))
        for n, shown in enumerate(shown_chats):
            phone.goto(f"{base}/chats/{shown.pk}/")
            expect(phone.locator("#m0 .message-menu")).to_be_visible()
            below = phone.evaluate(BELOW_NAME)
            assert below and all(gap < 0 for _, gap in below), below
            screenshot(phone, f"names-390-{n}", FOLDER)
        # The extraction panel's table breaks between words, not inside them ("summari|sed", "message|s").
        phone.locator(".chat-panel[data-panel=extraction] > summary").click()
        expect(phone.locator("#pipeline table.coverage")).to_be_visible()
        assert phone.evaluate(BROKEN_WORDS, "#pipeline table.coverage th, #pipeline table.coverage td") == []
        screenshot(phone, "extraction-390", FOLDER)
        assert phone.errors == []
    connections.close_all()
