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


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
