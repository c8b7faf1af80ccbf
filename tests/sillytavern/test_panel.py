"""The extension's panel as a person uses it: Extensions → Lorekeeper, type the server URL and a token, Test
connection, reload, chat. Nothing is written into SillyTavern's settings.json beforehand; each failure a browser can
tell apart gets its own words."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from apps.chats.models import Chat
from tests.browsers import ARTIFACTS
from tests.servers import free_port
from tests.sillytavern.harness import open_character, reload, send_message, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 45.0  # a ceiling, reached only on a loaded machine


def open_panel(page) -> None:
    """Extensions, then Lorekeeper's section, as a person clicks them; each click once what it opens has stopped
    sliding, as a person waits to see (a click while a drawer slides lands on what passes under the pointer, and
    SillyTavern keeps the section open or closed as it was left: clicked blindly, an open one closes)."""
    field = page.locator("#lorekeeper_server_url")
    toggle = page.locator(".lorekeeper-settings .inline-drawer-toggle")
    if not toggle.is_visible():
        page.locator("#extensions-settings-button .drawer-toggle").click()
        toggle.wait_for(state="visible")
        settled(page)
    for _ in range(3):
        if field.is_visible():
            break
        toggle.click()
        settled(page)
    field.wait_for(state="visible")


def settled(page) -> None:
    """SillyTavern's drawers slide with jQuery and CSS transitions: wait until neither is running (a spinner's
    endless animation aside)."""
    page.wait_for_function(
        """() => (!window.jQuery || jQuery(':animated').length === 0)
            && !document.getAnimations().some((animation) => animation.playState === 'running'
                && animation.effect?.getTiming().iterations !== Infinity)"""
    )


def type_connection(page, url: str, token: str) -> None:
    """Type into the two fields as a person does (select what is there, type over it) and Tab out of each."""
    for selector, text in (("#lorekeeper_server_url", url), ("#lorekeeper_api_token", token)):
        box = page.locator(selector)
        box.click()
        box.press("ControlOrMeta+a")
        box.press_sequentially(text)
        box.press("Tab")


def test_connection(page) -> str:
    """Press Test connection; answers the outcome it shows once the test is over."""
    page.locator("#lorekeeper_test").click()
    line = page.locator("#lorekeeper_connection")
    page.wait_for_function(
        "() => { const e = document.getElementById('lorekeeper_connection');"
        " return e && !e.hidden && e.dataset.state !== 'binding'; }",
        timeout=TIMEOUT * 1000,
    )
    return line.inner_text()


test_connection.__test__ = False  # a helper, not a test


def shoot_panel(page, shown, name: str) -> None:
    """What the person sees, on a desktop and a phone: the panel with `shown` in view, saved as
    extension/<name>-<width>.png among the test artifacts."""
    (ARTIFACTS / "extension").mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(500)  # SillyTavern lays its drawers out again after a resize
        open_panel(page)
        shown.evaluate("(element) => element.scrollIntoView({block: 'center'})")
        page.screenshot(path=str(ARTIFACTS / "extension" / f"{name}-{width}.png"))


def saved_extension_settings(st) -> dict:
    return st.read_settings().get("extension_settings", {}).get("lorekeeper", {})


def test_a_url_and_token_typed_into_the_panel_are_used_kept_and_synced(st, st_open, llm_server, lorekeeper):
    llm_server.default.content = "Mira nods."
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension={})  # the extension's defaults, as after installing it
    open_panel(page)
    type_connection(page, lorekeeper.url, lorekeeper.token)
    typed = {"server_url": lorekeeper.url, "api_token": lorekeeper.token}
    try:
        wait_until(
            lambda: typed.items() <= saved_extension_settings(st).items(),
            timeout=TIMEOUT,
            message="SillyTavern saved the typed URL and token",
        )
    except AssertionError:
        live = page.evaluate("() => SillyTavern.getContext().extensionSettings.lorekeeper")
        print(f"field: {page.locator('#lorekeeper_server_url').input_value()!r}; extensionSettings.lorekeeper: {live}")
        page.locator("#lorekeeper_test").click()
        page.wait_for_timeout(5000)
        print(f"after Test connection, the panel says: {page.locator('.lorekeeper-settings').inner_text()!r}")
        raise

    outcome = test_connection(page)
    assert outcome == f"Connected to Lorekeeper at {lorekeeper.url}.", outcome
    wait_until(lambda: typed.items() <= saved_extension_settings(st).items(), message="still saved after the test")

    reload(page)
    open_panel(page)
    assert page.locator("#lorekeeper_server_url").input_value() == lorekeeper.url
    assert page.locator("#lorekeeper_api_token").input_value() == lorekeeper.token

    open_character(page, "Mira")
    send_message(page, "Typed in the panel, then chatted.")

    def reached():
        chat = Chat.objects.filter(user=lorekeeper.user).first()
        return chat and chat.messages.filter(mes__contains="Typed in the panel").exists()

    wait_until(reached, timeout=TIMEOUT, interval=0.3, message="the message reached Lorekeeper")

    # The panel's story section, as a person opening it now sees it (panel.js draws it from Lorekeeper's answers).
    open_panel(page)
    page.locator("#lorekeeper_story_refresh").click()
    story = page.locator("#lorekeeper_story")
    story.get_by_text("Indexed for recall").wait_for(timeout=TIMEOUT * 1000)
    assert story.get_by_role("link", name="Open in Lorekeeper").get_attribute("href").startswith(lorekeeper.url)
    (ARTIFACTS / "extension").mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(500)  # SillyTavern lays its drawers out again after a resize
        open_panel(page)
        story.get_by_text("Indexed for recall").wait_for(timeout=TIMEOUT * 1000)
        story.evaluate("(element) => element.scrollIntoView({block: 'center'})")
        page.screenshot(path=str(ARTIFACTS / "extension" / f"sillytavern-panel-{width}.png"))


def test_a_token_pasted_and_the_page_reloaded_without_leaving_the_field_is_kept(st, st_open, lorekeeper):
    """A person types the address, pastes the token and reloads, the cursor still in the token's field (no change
    event): both were saved as typed. A time-out typed out of range shows the one used once the field is left."""
    page = st_open(extension={})
    open_panel(page)
    for selector, text in (("#lorekeeper_server_url", lorekeeper.url), ("#lorekeeper_api_token", lorekeeper.token)):
        box = page.locator(selector)
        box.click()
        box.press("ControlOrMeta+a")
        box.press_sequentially(text)
    typed = {"server_url": lorekeeper.url, "api_token": lorekeeper.token}
    wait_until(lambda: typed.items() <= saved_extension_settings(st).items(), message="saved without a change event")
    reload(page)
    open_panel(page)
    assert page.locator("#lorekeeper_server_url").input_value() == lorekeeper.url
    assert page.locator("#lorekeeper_api_token").input_value() == lorekeeper.token
    timeout = page.locator("#lorekeeper_timeout_ms")
    timeout.click()
    timeout.press("ControlOrMeta+a")
    timeout.press_sequentially("50")
    timeout.press("Tab")
    assert timeout.input_value() == "200"
    wait_until(lambda: saved_extension_settings(st).get("timeout_ms") == 200, message="the time-out used, saved")


def test_a_wrong_token_is_named_as_the_problem(st, st_open, lorekeeper):
    page = st_open(extension={})
    open_panel(page)
    type_connection(page, lorekeeper.url, "lk_not-a-real-token")
    outcome = test_connection(page)
    assert "refused the token (401)" in outcome, outcome
    assert "CORS" not in outcome


def test_a_url_where_nothing_listens_says_nothing_is_listening(st, st_open):
    page = st_open(extension={})
    open_panel(page)
    url = f"http://127.0.0.1:{free_port()}"
    type_connection(page, url, "lk_whatever")
    outcome = test_connection(page)
    assert f"Nothing is listening at {url}" in outcome, outcome
    assert "CORS" not in outcome


def test_an_address_typed_without_http_is_said_to_need_it_where_the_person_looks(st, st_open, lorekeeper):
    """Typed without its scheme, the address would be a path on SillyTavern's own server (the token sent there): the
    panel says what to add as soon as the field is left, the chat's status line says it too, and nothing is sent."""
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension={})
    open_character(page, "Mira")
    open_panel(page)
    typed = lorekeeper.url.removeprefix("http://")
    type_connection(page, typed, lorekeeper.token)
    said = page.locator("#lorekeeper_connection")
    expected = f"needs http:// or https:// before it: http://{typed} (or https://{typed})"
    assert expected in said.inner_text() and said.get_attribute("data-state") == "error"
    status = page.locator("#lorekeeper_status")
    page.wait_for_function(
        "(text) => document.getElementById('lorekeeper_status')?.textContent.includes(text)", arg=expected
    )
    assert status.inner_text().startswith("Not connected:")
    assert expected in test_connection(page)
    assert not Chat.objects.filter(user=lorekeeper.user).exists()
    shoot_panel(page, said, "panel-address-without-http")


def test_an_address_holding_a_login_is_named_where_the_person_looks(st, st_open, lorekeeper):
    """An address with a login in it (`http://user:password@host`): a browser sends no request there, which the
    panel took for nothing listening. It names the login, gives the address without it (never the password back)
    and sends nothing."""
    page = st_open(extension={})
    open_panel(page)
    typed = lorekeeper.url.replace("http://", "http://mira:s3cret@")
    type_connection(page, typed, lorekeeper.token)
    said = page.locator("#lorekeeper_connection")
    expected = (
        "the address holds a login (before its @), and a browser sends no request to such an address: "
        f"give {lorekeeper.url}."
    )
    assert expected in said.inner_text() and said.get_attribute("data-state") == "error", said.inner_text()
    outcome = test_connection(page)
    assert expected in outcome and "Nothing is listening" not in outcome and "s3cret" not in outcome, outcome
    assert not Chat.objects.filter(user=lorekeeper.user).exists()
    shoot_panel(page, said, "panel-address-with-login")


def test_a_token_pasted_with_a_hidden_character_is_named_where_the_person_looks(st, st_open, lorekeeper):
    """A token copied with a zero-width space cannot go in a header: the browser refuses the request before it
    leaves, which the panel took for a CORS refusal. It says what is wrong with the token, where, and sends nothing."""
    st.add_character("Mira", first_mes="Welcome back.")
    page = st_open(extension={})
    open_character(page, "Mira")
    open_panel(page)
    pasted = lorekeeper.token[:8] + "\u200b" + lorekeeper.token[8:]
    type_connection(page, lorekeeper.url, "x")
    box = page.locator("#lorekeeper_api_token")
    box.click()
    box.press("ControlOrMeta+a")
    page.keyboard.insert_text(pasted)  # as a paste puts it in: one input event
    box.press("Tab")
    said = page.locator("#lorekeeper_connection")
    expected = f"U+200B at character 9 of {len(pasted)}"
    assert expected in said.inner_text() and said.get_attribute("data-state") == "error", said.inner_text()
    page.wait_for_function(
        "(text) => document.getElementById('lorekeeper_status')?.textContent.includes(text)", arg=expected
    )
    assert page.locator("#lorekeeper_status").inner_text().startswith("Not connected: the token holds")
    outcome = test_connection(page)
    assert expected in outcome and "CORS" not in outcome, outcome
    assert not Chat.objects.filter(user=lorekeeper.user).exists()
    shoot_panel(page, said, "panel-token-hidden-character")


def test_an_origin_lorekeeper_does_not_allow_names_the_setting_and_the_origin(st, st_open, lorekeeper, settings):
    settings.CORS_ALLOWED_ORIGINS = ["http://elsewhere.example:8000"]
    page = st_open(extension={})
    open_panel(page)
    type_connection(page, lorekeeper.url, lorekeeper.token)
    outcome = test_connection(page)
    assert f"Add {st.origin} to LOREKEEPER_CORS_ORIGINS" in outcome, outcome


class _Silent:
    """A server that takes each connection and answers nothing, closing it after `hold` seconds: a test of the
    connection runs that long, then finds nothing listening."""

    def __init__(self, hold: float) -> None:
        self.hold, self.closed = hold, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                taken, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._hold, args=(taken,), daemon=True).start()

    def _hold(self, taken: socket.socket) -> None:
        time.sleep(self.hold)
        taken.close()
        self.closed += 1


def test_a_test_still_running_when_the_token_changes_does_not_cover_what_the_panel_says_of_it(st, st_open):
    """Test connection pressed, then a token pasted with a hidden character while the test still waits: the panel
    names the token's problem, and the test, which was about the token before, does not show its outcome over it
    when it ends."""
    silent = _Silent(hold=2.0)
    page = st_open(extension={})
    open_panel(page)
    type_connection(page, silent.url, "lk_whatever")
    page.locator("#lorekeeper_test").click()
    said = page.locator("#lorekeeper_connection")
    assert said.inner_text().startswith("Testing"), said.inner_text()
    box = page.locator("#lorekeeper_api_token")
    box.click()
    box.press("ControlOrMeta+a")
    page.keyboard.insert_text("lk_what\u200bever")
    box.press("Tab")
    expected = "U+200B at character 8"
    assert expected in said.inner_text(), said.inner_text()
    wait_until(lambda: silent.closed >= 2, timeout=TIMEOUT, message="the test's requests ended")  # nothing there
    page.wait_for_timeout(1000)
    assert expected in said.inner_text() and said.get_attribute("data-state") == "error", said.inner_text()
    assert "Nothing is listening" not in said.inner_text()
