"""The small day charts in a real headless Chromium (Debian's package, through Playwright), at a desktop's and a
phone's width: the memory page's growth chart and the models page's tokens chart load into their pages, draw inside
them (nothing wider than the screen) and leave no error in the console; another span of days is chosen with a click.
Screenshots in var/test-artifacts/ (chart-<name>-<width>.png)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.llm.models import Call
from apps.llm.services import connection_create
from apps.memories.models import Memory
from apps.memories.services.memories import memory_create
from tests.browsers import ARTIFACTS, session_cookie, watched_page

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTHS = (1100, 390)


def _fits(page, name: str, width: int) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator(".day-chart-figure").screenshot(path=str(ARTIFACTS / f"chart-{name}-{width}.png"), caret="initial")
    box = page.locator("svg.day-chart").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} is wider than {width} px"
    assert page.errors == []


def test_the_growth_and_tokens_charts_load_and_fit_a_phone(browser, live_server, client, user, character):
    now = timezone.now()
    for days in (80, 40, 12, 5, 5, 1, 0):
        memory = memory_create(user=user, character=character, kind="fact", content=f"Fact of {days} days ago.")
        Memory.objects.filter(pk=memory.pk).update(created_at=now - timedelta(days=days))
    model = connection_create(
        user=user, name="hosted", base_url="https://api.example.test/v1", model="m", price_prompt=Decimal("3")
    )
    for days, purpose in ((20, "extraction:facts"), (3, "chat"), (3, "consolidation"), (0, "chat")):
        call = Call.objects.create(
            user=user, connection=model, purpose=purpose, status="ok", prompt_tokens=40_000, completion_tokens=900
        )
        Call.objects.filter(pk=call.pk).update(created_at=now - timedelta(days=days))
    cookie = session_cookie(client, user)
    for width in WIDTHS:
        page = watched_page(browser, width, live_server, cookie)
        page.goto(f"{live_server.url}/memories/")
        summary = page.locator("#memory-growth-summary")
        summary.get_by_text("7 memories").wait_for()
        assert "+4 this week" in summary.inner_text()
        _fits(page, "growth", width)
        page.get_by_role("button", name="since the first").click()
        page.locator('#memory-growth button[aria-pressed="true"]', has_text="since the first").wait_for()
        _fits(page, "growth-all", width)

        page.goto(f"{live_server.url}/llm/")
        page.locator("#llm-usage-summary").get_by_text("163,600 tokens").wait_for()
        _fits(page, "tokens", width)
        page.context.close()
