"""The models page's tokens chart: tokens per day over the last 30 days, background memory work and the person's own
calls apart, and their cost at the prices set on the connections; never another person's calls; its empty state;
loaded into the connections page by htmx, for a signed-in person only."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.llm.models import Call
from apps.llm.selectors import call_tokens_by_day, day_start
from apps.llm.services import connection_create

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def connection(user, name="priced", **prices):
    return connection_create(user=user, name=name, base_url="https://api.example.test/v1", model="m", **prices)


def spend(user, *, days_ago=0, purpose="extraction:facts", prompt=1000, reply=500, via=None) -> Call:
    call = Call.objects.create(
        user=user, connection=via, purpose=purpose, status="ok", prompt_tokens=prompt, completion_tokens=reply
    )
    when = day_start() - timedelta(days=days_ago) + timedelta(hours=1)
    Call.objects.filter(pk=call.pk).update(created_at=when)
    return call


def test_tokens_per_day_keep_background_work_and_the_persons_own_calls_apart(user):
    spend(user, days_ago=0, purpose="extraction:facts", prompt=1000, reply=500)
    spend(user, days_ago=0, purpose="consolidation", prompt=100, reply=0)
    spend(user, days_ago=0, purpose="chat", prompt=2000, reply=300)
    spend(user, days_ago=2, purpose="model_test:extraction", prompt=10, reply=5)
    spend(user, days_ago=29, purpose="hierarchy.daily", prompt=7, reply=0)
    spend(user, days_ago=30, purpose="chat", prompt=99999, reply=0)  # before the 30 days

    usage = call_tokens_by_day(user=user, days=30)

    assert len(usage.days) == 30 and usage.days[-1] == timezone.localdate()
    assert usage.background[-1] == 1600 and usage.foreground[-1] == 2300
    assert usage.foreground[-3] == 15 and usage.background[-3] == 0
    assert usage.background[0] == 7
    assert usage.total == 1600 + 2300 + 15 + 7
    assert usage.cost is None  # no connection has a price


def test_the_cost_is_at_the_prices_set_and_calls_without_one_are_left_out(user):
    priced = connection(user, price_prompt=Decimal("2.50"), price_reply=Decimal("10"))
    half = connection(user, name="half", price_prompt=Decimal("1"))
    free = connection(user, name="free")
    spend(user, via=priced, prompt=1_000_000, reply=100_000)  # 2.50 + 1.00
    spend(user, via=half, prompt=500_000, reply=500_000)  # 0.50, the replies unpriced
    spend(user, via=free, prompt=3000, reply=1000)
    spend(user, via=None, prompt=40, reply=2)  # its connection was removed

    usage = call_tokens_by_day(user=user)

    assert usage.cost == Decimal("4.00")
    assert usage.unpriced_tokens == 4042


def test_other_peoples_calls_are_never_counted(web, user, other_user):
    theirs = connection(other_user, price_prompt=Decimal("100"))
    spend(other_user, via=theirs, prompt=5_000_000, reply=0)
    spend(user, purpose="chat", prompt=120, reply=3)
    usage = call_tokens_by_day(user=user)
    assert usage.total == 123 and usage.cost is None
    page = web.get("/llm/usage/", **HX).content.decode()
    assert "<strong>123 tokens</strong>" in page and "5,000,000" not in page and "at the prices" not in page


def test_the_chart_draws_both_kinds_stacked_and_sums_them_up_in_words(web, user):
    priced = connection(user, price_prompt=Decimal("3"), price_reply=Decimal("15"))
    spend(user, via=priced, purpose="extraction:facts", prompt=1_200_000, reply=0, days_ago=1)
    spend(user, via=priced, purpose="chat", prompt=0, reply=10_000)
    response = web.get("/llm/usage/", **HX)
    assert response.status_code == 200
    page = response.content.decode()
    assert "<strong>1,210,000 tokens</strong>" in page
    assert "1,200,000 for background memory work" in page and "10,000 for chats and tests" in page
    assert "about 3.75 at the prices you set" in page
    assert re.search(r'<path class="area area-background" d="M', page)
    assert re.search(r'<path class="area area-foreground" d="M', page)
    assert 'aria-describedby="llm-usage-summary"' in page
    today = timezone.localdate()
    assert f"{today:%Y-%m-%d}" not in page and f"{today.day} {today:%b}" in page


def test_a_tiny_cost_is_not_shown_as_nothing(web, user):
    priced = connection(user, price_prompt=Decimal("0.15"))
    spend(user, via=priced, prompt=1000, reply=0)
    assert "about less than 0.01 at the prices you set" in web.get("/llm/usage/", **HX).content.decode()


def test_without_calls_the_chart_says_so(web, user, other_user):
    spend(other_user, prompt=500)
    page = web.get("/llm/usage/", **HX).content.decode()
    assert "No tokens spent in the last 30 days: this chart fills as your connections are used." in page
    assert "<svg" not in page


def test_the_chart_asks_for_a_sign_in(client, user):
    spend(user, prompt=500)
    response = client.get("/llm/usage/", **HX)
    assert response.status_code == 302 and "/login" in response["Location"]


def test_the_chart_only_answers_a_get(web):
    assert web.post("/llm/usage/", **HX).status_code == 405


def test_the_connections_page_loads_the_chart(web):
    page = web.get("/llm/").content.decode()
    assert '<div id="llm-usage" hx-get="/llm/usage/" hx-trigger="load"' in page
