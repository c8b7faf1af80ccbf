"""A link to an old message of a long chat, in a real headless Chromium at a desktop's and a phone's width: the chat
opens around the message, scrolled to it and with it highlighted; scrolling down loads the newer messages and up the
older ones, in order and each once; the "go to message" box and a link of the older form (#m<N>) land the same way.
Screenshots in var/test-artifacts/ (place-<width>.png, and place-<width>-screen.png of the screen on arrival)."""

from __future__ import annotations

import pytest

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from tests.browsers import ARTIFACTS, screenshot, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTHS = (1100, 390)


@pytest.fixture
def long_chat(user):
    chat = chat_create(user=user, title="The harbour, at length", user_name="Rowan", character_name="Mira")
    Message.objects.bulk_create(
        Message(
            chat=chat,
            index=i,
            name="Rowan" if i % 2 else "Mira",
            is_user=bool(i % 2),
            # Lengths that vary, as a chat's do: a message of one line and one of a paragraph.
            mes=f"Line {i} of the harbour story." + " The fog rolled over the ledger desk." * (i % 7),
        )
        for i in range(300)
    )
    Chat.objects.filter(pk=chat.pk).update(message_count=300)
    return chat


@pytest.fixture
def cookie(client, user) -> str:
    return session_cookie(client, user)


def _in_view(page, index: int) -> bool:
    """The message's middle is on screen, below the sticky bars at the top and above the one at the bottom."""
    return page.evaluate(
        """(index) => {
            const box = document.getElementById("m" + index).getBoundingClientRect();
            const middle = (box.top + box.bottom) / 2;
            const place = document.querySelector(".chat-place").getBoundingClientRect();
            const bottom = [...document.querySelectorAll("#composer, .place-compose")]
                .map((bar) => bar.getBoundingClientRect())
                .filter((box) => box.height > 0)
                .reduce((top, box) => Math.min(top, box.top), window.innerHeight);
            return middle > place.bottom && middle < bottom;
        }""",
        index,
    )


def _scroll_until(page, index: int, step: int) -> None:
    """Scroll with the mouse wheel, as a person does, until message #index is on the page."""
    page.mouse.move(200, 450)
    for _ in range(120):
        if page.locator(f"#m{index}").count():
            return
        page.mouse.wheel(0, step)
        page.wait_for_timeout(120)
    raise AssertionError(f"message #{index} never loaded")


def _shown(page) -> list[int]:
    return page.evaluate("[...document.querySelectorAll('#messages article.message')].map(a => +a.dataset.index)")


@pytest.mark.slow  # about 10 s: .ci/run runs it after make test
def test_a_link_to_an_old_message_opens_the_chat_there_and_loads_both_ways(browser, live_server, cookie, long_chat):
    for width in WIDTHS:
        page = watched_page(browser, width, live_server, cookie)
        page.goto(f"{live_server.url}/chats/{long_chat.pk}/?at=160")
        target = page.locator("#m160")
        assert "place" in target.get_attribute("class").split() and target.get_attribute("aria-current") == "location"
        page.wait_for_load_state("networkidle")  # the panels above the chat have loaded and changed height
        assert _in_view(page, 160), "message #160 is not on screen"
        # A reply would land at the end, far below: the composer gives way to a link to the newest messages.
        assert page.get_by_text("A reply goes at the end of the chat").is_visible()
        assert not page.locator("#composer").is_visible()
        screenshot(page, f"place-{width}")
        page.screenshot(
            path=str(ARTIFACTS / f"place-{width}-screen.png"), caret="initial"
        )  # what the person sees on arrival
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"wider than {width} px"

        _scroll_until(page, 200, 700)
        page.wait_for_load_state("networkidle")
        _scroll_until(page, 120, -700)
        page.wait_for_load_state("networkidle")
        shown = _shown(page)
        assert shown == list(range(shown[0], shown[-1] + 1)), "messages out of order, missing or repeated"
        assert shown[0] <= 120 and shown[-1] >= 200
        assert page.locator("[aria-current=location]").count() == 1
        if width == WIDTHS[0]:  # down to the newest: the composer is back
            _scroll_until(page, 299, 1500)
            page.locator("#composer textarea").wait_for()
            assert not page.get_by_text("A reply goes at the end of the chat").is_visible()
            assert _shown(page) == list(range(_shown(page)[0], 300))
        assert page.errors == [], page.errors
        page.context.close()


def test_the_go_to_box_and_an_old_style_link_open_the_chat_at_the_message(browser, live_server, cookie, long_chat):
    page = watched_page(browser, 1100, live_server, cookie)
    page.goto(f"{live_server.url}/chats/{long_chat.pk}/")
    assert page.locator("#m299").count() and not page.locator("#m42").count()
    page.get_by_label("Go to message #").fill("42")
    page.get_by_role("button", name="Go", exact=True).click()
    page.wait_for_url(f"**/chats/{long_chat.pk}/?at=42")
    assert page.locator("#m42").get_attribute("aria-current") == "location" and _in_view(page, 42)

    page.goto(f"{live_server.url}/chats/{long_chat.pk}/#m100")
    page.wait_for_url(f"**/chats/{long_chat.pk}/?at=100")
    assert page.locator("#m100").get_attribute("aria-current") == "location" and _in_view(page, 100)

    page.goto(f"{live_server.url}/chats/{long_chat.pk}/?at=5000")
    assert page.get_by_role("alert").filter(has_text="no message #5000").is_visible()
    assert page.locator("#m299").count() and not page.locator("[aria-current]").count()
    assert page.errors == [], page.errors
    page.context.close()


def test_the_place_bar_stays_below_the_sites_bar_when_its_links_wrap(browser, live_server, client, long_chat, user):
    user.username = "a-reader-with-a-long-name"
    user.save(update_fields=["username"])
    for width in (1100, 900):  # at 900 px the site's links take two lines
        page = watched_page(browser, width, live_server, session_cookie(client, user))
        page.goto(f"{live_server.url}/chats/{long_chat.pk}/?at=150")
        page.locator("#m150.place").wait_for()
        page.mouse.wheel(0, 400)  # scrolled: both bars pinned
        bar = page.locator(".topbar").bounding_box()
        place = page.locator(".chat-place").bounding_box()
        assert place["y"] >= bar["y"] + bar["height"] - 1, (width, bar, place)
        assert page.errors == []
        page.context.close()
