"""The landing page, the site's 404 page, the phone menu, a chat whose history waits for the person's Run, and the
model connection form, in a real headless Chromium (Debian's package, through Playwright) at a desktop's and a
phone's width: nothing wider than the screen, no error in the console. Screenshots in var/test-artifacts/
(pages-<name>-<width>.png)."""

from __future__ import annotations

import pytest

from apps.extraction.models import ChatPipeline
from tests.browsers import screenshot, session_cookie, watched_page
from tests.extraction.helpers import add_turns, process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTHS = (1100, 390)


def _fits(page, name: str, width: int, *, errors_allowed: int = 0) -> None:
    screenshot(page, f"pages-{name}-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} is wider than {width} px"
    assert len(page.errors) <= errors_allowed, page.errors


# The fields of the page's main form whose label is not above them, or that take less than half the form's width.
LABELS_ABOVE_FIELDS = """() => [...document.querySelectorAll('main form.stacked input:not([type=hidden])')]
    .filter((field) => {
        const label = field.labels[0], form = field.form.getBoundingClientRect(), box = field.getBoundingClientRect();
        return !label || label.getBoundingClientRect().bottom > box.top + 1 || box.width < form.width / 2;
    }).map((field) => field.name)"""


def test_the_pages_a_newcomer_meets_fit_and_say_what_to_do(browser, live_server):
    for width in WIDTHS:
        page = watched_page(browser, width, live_server)
        page.goto(f"{live_server.url}/")
        assert page.get_by_role("heading", name="Lorekeeper remembers your story for the model").is_visible()
        _fits(page, "landing", width)
        page.goto(f"{live_server.url}/no/such/page/")
        assert page.get_by_role("heading", name="There is nothing here").is_visible()
        _fits(page, "404", width, errors_allowed=1)  # the browser reports the 404 itself in the console
        # The forms Django lays out (sign-up, sign-in): each label above its field, its help under it (they ran
        # together on one line, the fields a few letters wide).
        page.errors.clear()  # the 404's
        for name in ("signup", "login"):
            page.goto(f"{live_server.url}/accounts/{name}/")
            assert page.evaluate(LABELS_ABOVE_FIELDS) == [], name
            _fits(page, name, width)
        page.context.close()


def test_a_history_waiting_for_run_and_the_phone_menu(browser, live_server, client, user, model, story):
    add_turns(story, 100)
    process(story)
    cookie = session_cookie(client, user)
    for width in WIDTHS:
        page = watched_page(browser, width, live_server, cookie)
        page.goto(f"{live_server.url}/chats/{story.pk}/")
        panel = page.locator("#chat-decision")  # above the composer, wherever the page is scrolled
        panel.get_by_text("100 messages are waiting").wait_for()
        assert panel.get_by_role("button", name="Run").is_visible()
        menu = page.get_by_role("button", name="Menu")
        if width < 600:  # the links fold into a menu
            assert not page.locator("#site-nav").get_by_role("link", name="Memories").is_visible()
            menu.click()
            assert page.locator("#site-nav").get_by_role("link", name="Memories").is_visible()
            assert menu.get_attribute("aria-expanded") == "true"
        else:
            assert (
                not menu.is_visible() and page.locator("#site-nav").get_by_role("link", name="Memories").is_visible()
            )
        _fits(page, "consent", width)
        page.goto(f"{live_server.url}/llm/{model.pk}/")
        assert page.get_by_label("Use for background memory work").is_checked()
        assert page.get_by_label("Price per million prompt tokens").is_visible()
        _fits(page, "connection", width)
        page.context.close()

    page = watched_page(browser, 390, live_server, cookie)
    page.goto(f"{live_server.url}/chats/{story.pk}/")
    page.locator("#chat-decision").get_by_role("button", name="Run").click()
    page.locator("#chat-decision").get_by_text("Extracting this chat").wait_for()
    assert ChatPipeline.objects.get(chat=story).approved_through == 100

    # A delete on the page: the count in the header follows, and the extraction panel loads again by itself.
    assert page.locator("#message-count").inner_text() == "100 messages"
    page.on("dialog", lambda dialog: dialog.accept())
    with page.expect_response(lambda r: r.url.endswith(f"/chats/{story.pk}/pipeline/") and r.request.method == "GET"):
        page.locator("#m99 .message-menu > summary").click()
        page.locator("#m99").get_by_role("button", name="Delete from here").click()
        page.locator("#message-count").get_by_text("99 messages").wait_for()
    assert "integrity" not in page.locator("main").inner_text().lower()  # no UUIDs on the page
    page.context.close()


def test_moments_read_in_the_readers_own_time_zone(browser, live_server, client, user):
    from zoneinfo import ZoneInfo

    from apps.chats.services.chats import chat_create

    chat = chat_create(user=user, title="Harbour")
    cookie = session_cookie(client, user)
    page = watched_page(browser, 1100, live_server, cookie, timezone_id="Asia/Tokyo", locale="en-GB")
    page.goto(f"{live_server.url}/chats/")

    tokyo = chat.updated_at.astimezone(ZoneInfo("Asia/Tokyo"))
    shown = page.locator("time[data-local]").first.inner_text()
    assert f"{tokyo:%H:%M}" in shown and str(tokyo.year) in shown, shown
    assert page.errors == []
    page.context.close()
