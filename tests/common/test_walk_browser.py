"""Every page a person can reach from the menu and the chat page, in a real headless Chromium at a desktop's and a
phone's width, for an account with something on each: a chat of 300 messages extracted through the scripted model
(memories, entities, scenes, arcs, a relationship, the model's calls), a memory of the character, a persona, an API
token, two devices and a backup. Each page answers 200, writes no error in the console and is no wider than the
screen; signed out, the landing, sign-in and sign-up pages and the 404 page likewise. Screenshots in
var/test-artifacts/walk/ (<page>-<width>.png), for a person or a CI run to keep.

The data is made once and the pages walked in one test (one browser, one context a width): a transactional test's
database is emptied after each test, and extracting the chat is most of the cost."""

from __future__ import annotations

import pytest

from apps.accounts.services import api_token_create
from apps.archives.models import Backup
from apps.chats.services.personas import persona_create
from apps.extraction.services.settings import extraction_settings_set
from apps.memories.models import Entity, Memory
from apps.memories.services.memories import memory_create
from apps.sync.services.instances import instance_register
from tests.browsers import screenshot, session_cookie, watched_page
from tests.extraction.helpers import add_turns, process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.slow]  # .ci/run runs it

WIDTHS = (1100, 390)
MESSAGES = 300
FOLDER = "walk"


def _line(i: int) -> str:
    """A message of the story; every 25th opens a new day (a scene break the heuristics find)."""
    opening = "The next morning, " if i and i % 25 == 0 else ""
    return (
        f"{opening}Line {i} of the harbour story. Mira turned the ledger's pages while Rowan watched the door; the "
        "seal on the last page was pressed crooked, and neither of them said so."
    )


@pytest.fixture
def account(user, character, model, story):
    """The chat's history extracted as it arrives (in batches, as a person writes it), and the rest of an account
    around it. Answers the ids the pages' addresses need."""
    extraction_settings_set(user=user, data={"auto_extract": True})
    for _ in range(MESSAGES // 50):
        add_turns(story, 50, text=_line)
        process(story)
    memory_create(
        user=user,
        kind="fact",
        content="Mira keeps the harbour ledger's spare key on a cord around her neck.",
        character=character,
        importance=3,
        origin="manual",
    )
    persona_create(user=user, name="Rowan", description="A courier who reads the tides better than maps.")
    api_token_create(user=user, name="SillyTavern on the desktop")
    instance_register(user=user, key="sillytavern-desktop", name="SillyTavern on the desktop")
    instance_register(user=user, key="phone", name="Phone", kind="phone", priority=10)
    Backup.objects.create(user=user, kind="backup", trigger="manual", state="done", size=48213, counts={"chats": 1})
    memory = (
        Memory.objects.filter(user=user, chat=story, kind="revelation").first()
        or Memory.objects.filter(user=user, character=character).exclude(kind="message").first()
    )
    return {
        "at": MESSAGES // 2,
        "chat": story.pk,
        "character": character.pk,
        "connection": model.pk,
        "memory": memory.pk,
        "entity": Entity.objects.filter(user=user, name="Corvin").first().pk,
        "persona": user.personas.get().pk,
    }


def signed_in_pages(ids: dict) -> dict[str, str]:
    """The menu's pages and those the chat page links to (apps/*/urls.py), by a name for the screenshot."""
    chat, character = ids["chat"], ids["character"]
    return {
        "chats": "/chats/",
        "chat": f"/chats/{chat}/",
        "chat-at": f"/chats/{chat}/?at={ids['at']}",
        "chat-search": f"/chats/{chat}/search/?q=ledger",
        "story": f"/chats/{chat}/story/",
        "context": f"/chats/{chat}/context/?message=What+did+Corvin+do+with+the+seal%3F",
        "memories": "/memories/",
        "memories-chat": f"/chats/{chat}/memories/",
        "memories-character": f"/characters/{character}/memories/",
        "memories-search": "/memories/?q=ledger",
        "memory": f"/memories/{ids['memory']}/",
        "entities": "/memories/entities/",
        "entity": f"/memories/entities/{ids['entity']}/",
        "lifecycle": "/memories/lifecycle/",
        "embedding-settings": "/memories/settings/",
        "injection": "/memories/injection/",
        "models": "/llm/",
        "connection": f"/llm/{ids['connection']}/",
        "model-test": f"/llm/{ids['connection']}/model-test/",
        "calls": "/llm/calls/",
        "extraction-settings": "/extraction/settings/",
        "devices": "/devices/",
        "settings": "/settings/",
        "backups": "/backups/",
        "tokens": "/accounts/tokens/",
        "password": "/accounts/password_change/",
        "characters": "/characters/",
        "character": f"/characters/{character}/",
        "character-new": "/characters/new/",
        "personas": "/personas/",
        "persona": f"/personas/{ids['persona']}/",
        "welcome": "/welcome/",
    }


SIGNED_OUT = {"landing": "/", "login": "/accounts/login/", "signup": "/accounts/signup/"}
MISSING = "/no/such/page/"


def _watch_requests(page):
    """Count the page's requests in flight (what it loads after itself: panels, cards), for `_settle`."""
    page.in_flight = set()
    page.on("request", lambda request: page.in_flight.add(request))
    page.on("requestfinished", lambda request: page.in_flight.discard(request))
    page.on("requestfailed", lambda request: page.in_flight.discard(request))
    return page


def _settle(page, quiet_ms: int = 150, most_ms: int = 5000) -> None:
    """Until nothing has been in flight for `quiet_ms` (a page that polls is taken between two polls)."""
    quiet = 0
    for _ in range(most_ms // 50):
        quiet = quiet + 50 if not page.in_flight else 0
        if quiet >= quiet_ms:
            return
        page.wait_for_timeout(50)


def _visit(page, base: str, name: str, path: str, width: int, *, status: int = 200, expected: str = "") -> list:
    """Open the page and answer what is wrong with it (an empty list when nothing is); a console error containing
    `expected`, when given, is not."""
    page.errors.clear()
    response = page.goto(f"{base}{path}")
    _settle(page)
    screenshot(page, f"{name}-{width}", FOLDER)
    problems = []
    if response is None or response.status != status:
        problems.append(f"answered {response and response.status}, not {status}")
    if (over := page.evaluate("document.documentElement.scrollWidth") - width) > 0:
        problems.append(f"{over} px wider than the screen")
    if errors := [error for error in page.errors if not (expected and expected in error)]:
        problems.append(f"console: {errors}")
    return [f"{name} ({path}) at {width}: {problem}" for problem in problems]


def test_every_signed_in_page_fits_a_desktop_and_a_phone_without_errors(browser, live_server, client, user, account):
    cookie = session_cookie(client, user)
    pages = signed_in_pages(account)
    problems = []
    for width in WIDTHS:
        page = _watch_requests(watched_page(browser, width, live_server, cookie))
        for name, path in pages.items():
            problems += _visit(page, live_server.url, name, path, width)
        # The import form folds above the chats' table: opened, it fits too.
        page.goto(f"{live_server.url}/chats/")
        page.get_by_text("Import a chat").click()
        screenshot(page, f"chats-import-{width}", FOLDER)
        if (over := page.evaluate("document.documentElement.scrollWidth") - width) > 0:
            problems.append(f"chats' import form at {width}: {over} px wider than the screen")
        page.context.close()
    assert not problems, "\n".join(problems)


def test_the_signed_out_pages_and_the_404_page_fit_without_errors(browser, live_server, user):
    problems = []
    for width in WIDTHS:
        page = _watch_requests(watched_page(browser, width, live_server))
        for name, path in SIGNED_OUT.items():
            problems += _visit(page, live_server.url, name, path, width)
        # The browser reports the 404 answer itself in the console: that error is the page's own.
        problems += _visit(page, live_server.url, "404", MISSING, width, status=404, expected="status of 404")
        page.context.close()
    assert not problems, "\n".join(problems)
