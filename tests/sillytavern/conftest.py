"""End-to-end fixtures: a real SillyTavern (one server per test session, its user data emptied before each test),
Debian's Chromium driven by Playwright, the scripted model (`llm_server`) as SillyTavern's chat-completion source,
and Lorekeeper itself on pytest-django's live server, allowing SillyTavern's origin by CORS.

A test that talks to Lorekeeper needs the transactional database (`pytest.mark.django_db(transaction=True)`, which
the `lorekeeper` fixture requests). Everything here carries the `sillytavern` and `browser` markers.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from tests.sillytavern import harness

HERE = Path(__file__).resolve().parent
USER_FOLDERS = ("characters", "chats", "groups", "group chats", "backups", "extensions", "worlds")


def pytest_collection_modifyitems(items) -> None:
    # Slow too: the suite takes about two and a half minutes, past what make test can spend within its 10; .ci/run
    # runs it right after make test.
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.sillytavern)
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.sillytavern_failed = True
    return report


def _unavailable(message: str) -> None:
    """Skip where the tools are simply absent; fail on CI, which installs them, so breakage is not hidden."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def sillytavern_install() -> Path:
    """The installed SillyTavern (installed and warmed up on first use: about two minutes, once per machine)."""
    too_old = harness.node_too_old()
    if too_old:
        pytest.skip("SillyTavern end-to-end tests need " + too_old)
    missing = harness.missing_prerequisites()
    if missing:
        _unavailable("SillyTavern end-to-end tests need " + "; ".join(missing))
    if importlib.util.find_spec("playwright") is None:
        _unavailable("SillyTavern end-to-end tests need the playwright package (pip install -e '.[dev]')")
    return harness.sillytavern_install()


@pytest.fixture(scope="session")
def sillytavern(sillytavern_install, tmp_path_factory) -> harness.SillyTavern:
    """One SillyTavern server for the session, on its own port with a fresh data root."""
    instance = harness.SillyTavern.create(install=sillytavern_install, root=tmp_path_factory.mktemp("sillytavern"))
    instance.start()
    yield instance
    instance.stop()


@pytest.fixture
def st(sillytavern, request) -> harness.SillyTavern:
    """The session's SillyTavern with default-user's characters, chats, groups and extensions emptied (running again
    if an earlier test stopped it). Write characters and groups before opening the page, or reload it after."""
    for folder in USER_FOLDERS:
        shutil.rmtree(sillytavern.user_dir / folder, ignore_errors=True)
        (sillytavern.user_dir / folder).mkdir(parents=True)
    if not sillytavern.running:
        sillytavern.start()
    yield sillytavern
    if getattr(request.node, "sillytavern_failed", False):
        print(f"--- SillyTavern log ({sillytavern.log_path}):\n{sillytavern.log_tail()}")


@pytest.fixture
def st_extension_source() -> Path:
    """The extension folder `st_open` installs; override it in a module to test another."""
    return harness.EXTENSION_SOURCE


@pytest.fixture
def st_browser(monkeypatch):
    """Debian's Chromium, headless, through Playwright (never a downloaded browser)."""
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=harness.chromium_path(), args=harness.CHROMIUM_FLAGS)
        yield browser
        browser.close()
        # ORM calls made while Playwright runs hold connections of their own (Django's are per context): closed
        # here, while that context lasts, or the test database could not be dropped at the end.
        connections.close_all()


@dataclass
class Opener:
    """`st_open(...)` opens SillyTavern in a new browser context; `console` collects every page's console."""

    st: harness.SillyTavern
    browser: Any
    model_url: str
    extension_source: Path
    console: list[str] = field(default_factory=list)
    pages: list[Any] = field(default_factory=list)

    def __call__(
        self,
        *,
        extension: dict[str, Any] | None = None,
        extension_source: Path | None = None,
        install_extension: bool = True,
        settings: Callable[[dict[str, Any]], None] | None = None,
        stream: bool = False,
        timeout: float = harness.PAGE_TIMEOUT,
    ):
        """Write default-user's settings.json (the scripted model as the Custom source, `extension` as
        `extension_settings.lorekeeper`, then `settings(data)` to change anything else), install the extension
        folder, and open the page once SillyTavern is ready. Without `extension` the extension's sync and injection
        are off (its defaults would reach for a Lorekeeper on 127.0.0.1:8720); `extension={}` leaves its defaults."""
        if extension is None:
            extension = {"sync": False, "inject": False}
        data = harness.user_settings(self.st.install, model_url=self.model_url, extension=extension, stream=stream)
        if settings is not None:
            settings(data)
        self.st.write_settings(data)
        if install_extension:
            self.st.install_extension(extension_source or self.extension_source)
        page = harness.open_sillytavern(self.browser, self.st, timeout=timeout, console=self.console)
        self.pages.append(page)
        return page


@pytest.fixture
def st_open(st, st_browser, llm_server, st_extension_source, request) -> Opener:
    """A factory opening SillyTavern pages; see `Opener.__call__`. The test's `llm_server` answers the chats."""
    opener = Opener(st=st, browser=st_browser, model_url=llm_server.url, extension_source=st_extension_source)
    yield opener
    if getattr(request.node, "sillytavern_failed", False):
        print("--- browser console:\n" + "\n".join(opener.console[-80:]))
    for page in opener.pages:
        page.context.close()


@pytest.fixture
def st_page(st_open):
    """SillyTavern open in Chromium with the extension installed, its sync and injection off."""
    return st_open()


@dataclass
class Lorekeeper:
    """Lorekeeper on the live server, as the extension sees it: its URL, a user and that user's raw API token."""

    url: str
    user: Any
    token: str

    def extension_settings(self, **overrides: Any) -> dict[str, Any]:
        """`extension_settings.lorekeeper` pointing the extension at this server."""
        values = {"server_url": self.url, "api_token": self.token, "sync": True, "inject": True, "timeout_ms": 10_000}
        return values | overrides


@pytest.fixture
def lorekeeper(transactional_db, live_server, settings, user, sillytavern) -> Lorekeeper:
    """Lorekeeper on pytest-django's live server, answering CORS for SillyTavern's origin, with `user` and a token."""
    from apps.accounts.services import api_token_create

    settings.CORS_ALLOWED_ORIGINS = [sillytavern.origin]
    _, raw = api_token_create(user=user, name="SillyTavern")
    return Lorekeeper(url=live_server.url, user=user, token=raw)
