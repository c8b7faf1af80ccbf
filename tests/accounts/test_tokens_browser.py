"""The API tokens page in a real headless Chromium, at a desktop's and a phone's width, for a person at the most
tokens in use: they type a name, press Create, and read why no token was made; revoking one lets the next be made.
Screenshots in var/test-artifacts/tokens/."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.accounts.models import ApiToken
from apps.accounts.selectors import REVOKED_SHOWN
from apps.accounts.services import MAX_ACTIVE_TOKENS, api_token_create
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_at_the_most_tokens_is_told_why_and_revokes_one(browser, live_server, client, user, width):
    for n in range(REVOKED_SHOWN + 5):
        api_token_create(user=user, name=f"old laptop {n}")
    ApiToken.objects.filter(user=user).update(revoked_at=timezone.now())
    for n in range(MAX_ACTIVE_TOKENS):
        api_token_create(user=user, name=f"device {n}")
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/accounts/tokens/")
    page.get_by_label("Name").fill("SillyTavern on the phone")
    page.get_by_role("button", name="Create token").click()
    page.get_by_text("the most there can be").wait_for()
    assert "5 tokens revoked earlier are not listed" in page.inner_text("#token-panel")
    screenshot(page, f"at-the-cap-{width}", "tokens")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() == MAX_ACTIVE_TOKENS

    page.once("dialog", lambda dialog: dialog.accept())  # "Revoke …? Clients using it will stop working."
    page.locator("tr", has_text="device 0").get_by_role("button", name="Revoke").click()
    page.locator("tr.revoked", has_text="device 0").wait_for()
    page.get_by_label("Name").fill("SillyTavern on the phone")
    page.get_by_role("button", name="Create token").click()
    page.get_by_test_id("new-token").wait_for()
    made = page.get_by_test_id("new-token").inner_text()
    assert made.startswith("lk_")
    # Copy puts it on the clipboard, as a person pastes it into SillyTavern or a front end.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page.get_by_role("button", name="Copy").click()
    page.get_by_text("Copied.").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == made
    assert not page.errors, page.errors
