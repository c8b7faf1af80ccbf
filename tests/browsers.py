"""Headless Chromium for the browser tests: Debian's package driven by Playwright, never a downloaded browser. A
machine without it skips those tests, except in CI, where a missing browser fails them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(settings.BASE_DIR) / "var" / "test-artifacts"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator:
    """A launched browser (Playwright's sync API: it runs an event loop in this thread, so the test's own ORM calls
    need DJANGO_ALLOW_ASYNC_UNSAFE, set by the caller's monkeypatch)."""
    if not CHROMIUM:
        message = "Debian's chromium is not installed (apt install chromium)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page, name: str, folder: str = "") -> Path:
    """The whole page, as var/test-artifacts/[folder/]name.png. The caret is left as it is: Playwright hides it with
    an inline style, which the pages' Content-Security-Policy refuses (a console error every test would see)."""
    directory = ARTIFACTS / folder if folder else ARTIFACTS
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, caret="initial")
    return path


@pytest.fixture
def browser(monkeypatch):
    """A launched Chromium for a test's pages (tests/conftest.py lists this module as a plugin)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with chromium() as launched:
        yield launched
        connections.close_all()  # the ORM calls made under Playwright's greenlet hold a connection of their own


def session_cookie(client, user) -> str:
    """The session of `user` signed in, for a browser context."""
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def watched_page(browser, width: int, live_server, cookie: str | None = None, **options):
    """A page `width` px wide (signed in with `cookie`), whose console errors and uncaught exceptions are kept in
    `page.errors`."""
    context = browser.new_context(viewport={"width": width, "height": 900}, **options)
    if cookie:
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
    page = context.new_page()
    page.errors = []
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    return page


# The words of the elements `selector` finds that a line break cuts in two (a hyphen's or a comma's
# break aside).
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/[^\\s,-]+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        if (range.getClientRects().length > 1) broken.push(word[0]);
      }
    }
  }
  return broken;
}"""
