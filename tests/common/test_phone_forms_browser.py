"""Three faults a newcomer met on a phone (390 px wide), in a real headless Chromium: a lorebook's entries broke their
keys inside words ("drown ed", "midwin ter") and dropped their Position and Order; the backups form put each radio
above its label and "every 24 hours" over three lines; and neither the site's menu nor the API docs led anywhere
useful (no Backups in the menu, no way back to the app from the docs). Each page at a desktop's width too.
Screenshots in var/test-artifacts/phone-fixes/."""

from __future__ import annotations

import pytest

from apps.lorebooks.services.books import lorebook_import
from apps.sync.services.instances import instance_register
from tests.browsers import BROKEN_WORDS, screenshot, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

FOLDER = "phone-fixes"
PHONE, DESKTOP = 390, 1280
SAVED = {"selective": True, "useProbability": True, "probability": 100}
# Each entry's keys, position (a label on the page) and order: orders no other number on the page shares. Short keys
# beside a long preview (and badges) are what squeezed the keys' column to a few letters.
ENTRIES = [
    (["drowned", "bells"], 0, "Before the character", 317),
    (["midwinter"], 1, "After the character", 242),
    (["tempest", "storm over the harbour"], 4, "At a depth in the chat", 958),
    (["lighthouse keeper", "keeper", "lamp"], 6, "After the example messages", 611),
]
WORLD = {"entries": {
    str(uid): {**SAVED, "uid": uid, "key": keys, "comment": f"Lore {uid}", "constant": uid == 1,
               "vectorized": uid == 1, "position": position, "depth": 2, "order": order,
               "content": "What the harbour remembers of it, told at length. " * 3}
    for uid, (keys, position, _, order) in enumerate(ENTRIES)
}}  # fmt: skip


# The box of a label's text and of its input, for each label of the backups form: [text, input's box, text's boxes].
FORM_LINES = """() => [...document.querySelectorAll('#backups-card form[action$="/mode/"] label')].map(label => {
  const box = (rect) => ({top: rect.top, bottom: rect.bottom, left: rect.left, right: rect.right});
  const words = [];
  const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.data.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    words.push(...[...range.getClientRects()].map(box));
  }
  const input = label.querySelector('input');
  return [label.textContent.trim(), input.type, box(input.getBoundingClientRect()), words];
})"""


def _width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def _one_line(boxes: list[dict]) -> bool:
    """The boxes share a line: each overlaps every other vertically."""
    return max(box["top"] for box in boxes) < min(box["bottom"] for box in boxes)


@pytest.fixture
def cookie(client, user) -> str:
    return session_cookie(client, user)


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_a_lorebooks_entries_keep_their_keys_whole_and_show_position_and_order(browser, live_server, cookie, user,
                                                                               width):  # fmt: skip
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    page = watched_page(browser, width, live_server, cookie)
    page.goto(f"{live_server.url}/lorebooks/{book.pk}/")
    screenshot(page, f"lorebook-{width}", FOLDER)
    assert page.evaluate(BROKEN_WORDS, "table.lore-entries td.keys") == [], "a key is broken inside a word"
    for uid, (_, _, position, order) in enumerate(ENTRIES):
        row = page.locator("table.lore-entries tbody tr").filter(has=page.get_by_role("link", name=f"Lore {uid}"))
        shown = row.inner_text()  # the text drawn: none of a hidden cell's
        assert position in shown and str(order) in shown, f"entry {uid}: position or order not shown: {shown!r}"
    assert _width(page) <= width, "the page is wider than the screen"
    assert page.errors == []


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_backups_form_reads_as_a_form(browser, live_server, cookie, width):
    page = watched_page(browser, width, live_server, cookie)
    page.goto(f"{live_server.url}/devices/")
    form = page.locator('#backups-card form[action$="/mode/"]')
    form.wait_for()  # the card arrives after the page
    screenshot(page, f"devices-{width}", FOLDER)
    labels = page.evaluate(FORM_LINES)
    assert {kind for _, kind, _, _ in labels} == {"radio", "number"}
    for text, kind, field, words in labels:
        # Each radio beside its label, left of it; "every 24 hours", "keep 5 backups" on one line each.
        assert _one_line([field, *words]), f"{text!r}: not on one line"
        if kind == "radio":
            assert field["right"] <= words[0]["left"], f"{text!r}: the radio is not before its label"
        elif width == PHONE:
            assert field["bottom"] - field["top"] >= 44, f"{text!r}: the field is too small to tap"
    if width == PHONE:
        assert form.get_by_role("button", name="Save").bounding_box()["height"] >= 44, "Save is too small to tap"
    assert _width(page) <= width, "the page is wider than the screen"
    assert page.errors == []


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_menu_leads_to_the_backups(browser, live_server, cookie, user, width):
    for n in range(8):  # devices enough that the backups card is below the first screen
        instance_register(user=user, key=f"sillytavern-{n}", name=f"SillyTavern on computer {n}")
    page = watched_page(browser, width, live_server, cookie)
    page.goto(f"{live_server.url}/chats/")
    if width == PHONE:
        page.get_by_role("button", name="Menu").click()
    names = [name.strip() for name in page.locator("#site-nav a").all_inner_texts()]
    assert "Backups" in names and names.index("Backups") == names.index("Devices") + 1, names
    screenshot(page, f"menu-{width}", FOLDER)
    page.locator("#site-nav").get_by_role("link", name="Backups", exact=True).click()
    page.locator('#backups-card form[action$="/mode/"]').wait_for()
    card = page.locator("#backups-card")
    assert page.url.endswith("/devices/#backups-card")
    assert card.get_by_role("heading", name="Backups").is_visible()
    # Scrolled to: the card at the top of the window, below the site's bar (which stays pinned on a desktop), or,
    # the page scrolled to its end, the whole card in view.
    top = card.bounding_box()["y"]
    bar = page.locator(".topbar").bounding_box()
    below = bar["y"] + bar["height"] if width == DESKTOP else 0
    at_end = page.evaluate("scrollY + innerHeight >= document.documentElement.scrollHeight - 1")
    assert below <= top and (top <= below + 30 or at_end), f"the card is at {top} px, the bar ends at {below} px"
    screenshot(page, f"menu-backups-{width}", FOLDER)
    assert page.errors == []


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_api_docs_lead_back_to_the_app(browser, live_server, cookie, width):
    page = watched_page(browser, width, live_server, cookie)
    page.goto(f"{live_server.url}/api/v1/docs/")
    page.locator("#swagger-ui .info").wait_for()
    screenshot(page, f"api-docs-{width}", FOLDER)
    back = page.get_by_role("link", name="Lorekeeper", exact=False).first
    assert back.is_visible()
    assert back.bounding_box()["y"] < page.locator("#swagger-ui").bounding_box()["y"], "the link is not at the top"
    assert _width(page) <= width, "the page is wider than the screen"
    assert page.errors == []  # the page's Content-Security-Policy refused nothing
    assert back.get_attribute("href") == "/"  # the app's home (a newcomer's goes on to the welcome page)
    back.click()
    page.locator(".topbar .brand").wait_for()
    assert not page.url.startswith(f"{live_server.url}/api/")
