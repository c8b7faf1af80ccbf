"""The memory browser's growth chart: active memories per day (made, and retired on the day they were retired), scoped
as the page is (all, a character's, a chat's), never counting another person's; its summary, its empty state, its
days to choose, and the htmx placeholder that loads it into each memory page."""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

import pytest
from django.utils import timezone

from apps.chats.services.characters import character_create
from apps.chats.services.chats import chat_create
from apps.memories.models import Memory
from apps.memories.selectors import memory_growth
from apps.memories.services.indexing import chat_index_messages
from apps.memories.services.memories import memory_create, memory_retire
from tests.chats.factories import add_messages

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
TODAY = date(2025, 3, 31)


@pytest.fixture(autouse=True)
def no_embeddings(settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"


def at(day: date, hour: int = 12) -> datetime:
    return timezone.make_aware(datetime.combine(day, time(hour)))


def remember(user, *, made: date, retired: date | None = None, character=None, chat=None, kind="fact") -> Memory:
    memory = memory_create(user=user, character=character, chat=chat, kind=kind, content=f"Made {made} ({kind}).")
    if retired is not None:
        memory_retire(memory=memory)
        Memory.objects.filter(pk=memory.pk).update(changed_at=at(retired))
    Memory.objects.filter(pk=memory.pk).update(created_at=at(made))
    return memory


def body(response) -> str:
    return response.content.decode()


# ------------------------------------------------------------------------------------------------ the counts


def test_a_memory_counts_from_the_day_it_was_made_until_the_day_it_was_retired(user, character):
    remember(user, character=character, made=TODAY - timedelta(days=40))  # before the days drawn
    remember(user, character=character, made=TODAY - timedelta(days=5))
    remember(user, character=character, made=TODAY - timedelta(days=5))
    remember(user, character=character, made=TODAY - timedelta(days=3), retired=TODAY - timedelta(days=1))
    remember(user, character=character, made=TODAY - timedelta(days=50), retired=TODAY - timedelta(days=45))

    growth = memory_growth(user=user, days=30, today=TODAY)

    assert len(growth.days) == 30 and growth.days[0] == TODAY - timedelta(days=29) and growth.days[-1] == TODAY
    by_day = dict(zip(growth.days, growth.active, strict=True))
    assert growth.before == 1  # made 40 days ago; the other old one was retired before the days drawn
    assert by_day[TODAY - timedelta(days=6)] == 1
    assert by_day[TODAY - timedelta(days=5)] == 3
    assert by_day[TODAY - timedelta(days=3)] == 4
    assert by_day[TODAY - timedelta(days=1)] == 3
    assert growth.now == 3 == Memory.objects.filter(user=user, status="active").count()
    assert growth.change() == 2 and growth.ever == 5


def test_a_memory_retired_before_it_was_made_elsewhere_never_counts_below_zero(user, character):
    # A memory pushed from a device may carry a last change older than its arrival here.
    remember(user, character=character, made=TODAY - timedelta(days=2), retired=TODAY - timedelta(days=10))
    growth = memory_growth(user=user, days=30, today=TODAY)
    assert min(growth.active) == 0 and growth.active[-3] == 0 and growth.now == 0


def test_since_the_first_memory_starts_on_the_day_of_the_first(user, character):
    remember(user, character=character, made=TODAY - timedelta(days=120))
    remember(user, character=character, made=TODAY - timedelta(days=2))
    growth = memory_growth(user=user, days=None, today=TODAY)
    assert growth.days[0] == TODAY - timedelta(days=120) and len(growth.days) == 121
    assert growth.active[0] == 1 and growth.now == 2 and growth.before == 0


def test_chat_messages_are_left_out_as_the_list_leaves_them_out(user, mira_chat):
    add_messages(mira_chat, 4)
    chat_index_messages(chat_id=mira_chat.pk)
    assert Memory.objects.filter(user=user, kind="message").count() == 4
    remember(user, chat=mira_chat, made=timezone.localdate())
    assert memory_growth(user=user).now == 1


def test_a_chat_counts_its_own_and_its_characters_persistent_memories_only(user, character, mira_chat):
    other_chat = chat_create(user=user, title="Elsewhere", character_ids=[character.pk])
    stranger = character_create(user=user, name="Stranger")
    today = timezone.localdate()
    remember(user, chat=mira_chat, made=today)
    remember(user, character=character, made=today)
    remember(user, chat=other_chat, made=today)
    remember(user, character=stranger, made=today)
    assert memory_growth(user=user, chat_id=mira_chat.pk).now == 2
    assert memory_growth(user=user, character_id=character.pk).now == 3  # its own and both its chats'
    assert memory_growth(user=user, character_id=stranger.pk).now == 1
    assert memory_growth(user=user).now == 4


# ------------------------------------------------------------------------------------------------ the partial


def test_the_chart_sums_up_the_memories_and_the_week_in_words(web, user, character):
    today = timezone.localdate()
    for days in (20, 3, 2, 0):
        remember(user, character=character, made=today - timedelta(days=days))
    response = web.get("/memories/growth/", **HX)
    assert response.status_code == 200
    page = body(response)
    assert "<strong>4 memories</strong>" in page and "+3 this week" in page
    assert 'role="img"' in page and 'aria-describedby="memory-growth-summary"' in page
    assert re.search(r'<path class="line line-active" d="M[\d., ]+"', page)
    assert f"{today:%Y-%m-%d}" not in page  # dates in words, never ISO
    assert f"{today.day} {today:%b}" in page
    assert 'aria-pressed="true">30 days</button>' in page


def test_other_peoples_memories_are_never_counted(web, user, other_user, character):
    theirs = character_create(user=other_user, name="Theirs")
    for _ in range(3):
        remember(other_user, character=theirs, made=timezone.localdate())
    remember(user, character=character, made=timezone.localdate())
    assert "<strong>1 memory</strong>" in body(web.get("/memories/growth/", **HX))


def test_another_persons_chat_or_character_is_not_found(web, other_user):
    theirs = character_create(user=other_user, name="Theirs")
    chat = chat_create(user=other_user, title="Theirs", character_ids=[theirs.pk])
    memory_create(user=other_user, character=theirs, kind="fact", content="Secret.")
    assert web.get(f"/chats/{chat.pk}/memories/growth/", **HX).status_code == 404
    assert web.get(f"/characters/{theirs.pk}/memories/growth/", **HX).status_code == 404


def test_without_memories_the_chart_says_so(web, mira_chat):
    page = body(web.get(f"/chats/{mira_chat.pk}/memories/growth/", **HX))
    assert "No memories yet: this chart of how they grow starts with the first one." in page
    assert "<svg" not in page


def test_the_days_shown_are_chosen_and_a_wrong_choice_is_named(web, user, character):
    remember(user, character=character, made=timezone.localdate() - timedelta(days=60))
    page = body(web.get("/memories/growth/?span=90", **HX))
    assert 'aria-pressed="true">90 days</button>' in page and "<strong>1 memory</strong>" in page
    assert 'hx-get="/memories/growth/?span=all"' in page
    response = web.get("/memories/growth/?span=7", **HX)
    assert response.status_code == 400
    assert "Span: choose 30 days, 90 days or since the first memory." in body(response)


def test_the_chart_asks_for_a_sign_in(client):
    response = client.get("/memories/growth/", **HX)
    assert response.status_code == 302 and "/login" in response["Location"]


def test_each_memory_page_loads_its_own_chart(web, character, mira_chat):
    for page, chart in (
        ("/memories/", "/memories/growth/"),
        (f"/characters/{character.pk}/memories/", f"/characters/{character.pk}/memories/growth/"),
        (f"/chats/{mira_chat.pk}/memories/", f"/chats/{mira_chat.pk}/memories/growth/"),
    ):
        html = body(web.get(page))
        assert f'<div id="memory-growth" hx-get="{chart}" hx-trigger="load"' in html
