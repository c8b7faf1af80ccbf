"""The Models page in a real headless Chromium at a desktop's and a phone's width: a connection whose profile was
detected and whose test passed keeps "(detected)" on one line. Screenshots in var/test-artifacts/
(models-1280.png, models-390.png)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.llm.models import Connection
from tests.browsers import screenshot, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


# Whether a select is wide enough for `text` in its own font (its arrow and padding allowed for).
FITS = """(select, text) => {
  const style = getComputedStyle(select);
  const context = document.createElement("canvas").getContext("2d");
  context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  return context.measureText(text).width + padding + 20 <= select.getBoundingClientRect().width;
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_detected_profile_note_stays_whole(browser, live_server, client, user, llm, width):
    Connection.objects.filter(pk=llm.pk).update(
        last_tested_at=timezone.now(), last_test_ok=True, last_test_message="answered in 257 ms: 'OK'"
    )
    page = watched_page(browser, width, live_server, session_cookie(client, user))
    page.goto(f"{live_server.url}/llm/")
    screenshot(page, f"models-{width}")

    note = page.locator(f"#connection-{llm.pk} td[data-label=Profile] .meta")
    assert note.inner_text() == "(detected)"
    assert note.evaluate("element => element.getClientRects().length") == 1, "the note broke over two lines"
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # The add form's choices are shown whole (on a phone a third of the width cut them: "OpenAI-co", "Detect fro").
    for name in ("api", "profile"):
        chosen = page.locator(f".connection-form select[name={name}]")
        text = chosen.evaluate("select => select.options[select.selectedIndex].text")
        assert chosen.evaluate(FITS, text), f"{name}: {text!r} is cut short"
    assert page.errors == []
