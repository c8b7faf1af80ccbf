"""A chat opened at one message (?at=N): the messages around N with N highlighted, the runs above and below loaded
on demand, the "go to message" box, and a bad ?at= answered with the newest messages and a notice."""

import re

import pytest

from apps.chats import selectors
from apps.chats.templatetags.chat_links import message_url
from tests.chats.factories import ChatFactory, add_messages

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def long_chat(user):
    chat = ChatFactory(user=user)
    add_messages(chat, 300)
    return chat


def shown(html: str) -> list[int]:
    return [int(index) for index in re.findall(r'<article class="message[^"]*" id="m(\d+)"', html)]


def test_a_chat_opened_at_a_message_shows_the_messages_around_it_with_it_highlighted(web, long_chat):
    response = web.get(f"/chats/{long_chat.pk}/?at=160")
    page = response.content.decode()
    assert response.status_code == 200
    assert shown(page) == list(range(145, 175))
    assert re.findall(r'<article class="message ([^"]*)" id="m160" data-index="160" aria-current="location">', page)
    assert re.search(r'class="message [a-z]+ place" id="m160"', page)
    assert page.count("aria-current=") == 1 and page.count(' place"') == 1
    assert f"/chats/{long_chat.pk}/older/?before=145" in page
    assert f"/chats/{long_chat.pk}/newer/?after=174" in page
    assert f'id="messages" class="messages" data-chat="{long_chat.pk}" data-at="160"' in page  # chat-page.js
    assert f'<a class="to-newest" href="/chats/{long_chat.pk}/">' in page


def test_newer_messages_load_in_runs_down_to_the_newest(web, long_chat):
    run = web.get(f"/chats/{long_chat.pk}/newer/?after=174", **HX).content.decode()
    assert shown(run) == list(range(175, 205))
    assert "<html" not in run and "/older/" not in run and "aria-current" not in run
    assert f"/chats/{long_chat.pk}/newer/?after=204" in run
    last = web.get(f"/chats/{long_chat.pk}/newer/?after=289", **HX).content.decode()
    assert shown(last) == list(range(290, 300)) and "/newer/" not in last
    assert shown(web.get(f"/chats/{long_chat.pk}/newer/?after=299", **HX).content.decode()) == []
    for bad in ("x", "99999999999999999999999", "-5"):
        answer = web.get(f"/chats/{long_chat.pk}/newer/?after={bad}", **HX)
        assert answer.status_code == 200, bad
    assert shown(web.get(f"/chats/{long_chat.pk}/newer/?after=-5", **HX).content.decode()) == list(range(30))


def test_older_runs_loaded_above_a_place_do_not_offer_newer_ones(web, long_chat):
    run = web.get(f"/chats/{long_chat.pk}/older/?before=145", **HX).content.decode()
    assert shown(run) == list(range(115, 145))
    assert "?before=115" in run and "/newer/" not in run


def test_near_either_end_the_window_slides_to_hold_a_full_run(web, long_chat):
    first = web.get(f"/chats/{long_chat.pk}/?at=3").content.decode()
    assert shown(first) == list(range(30)) and "/older/" not in first and "?after=29" in first
    last = web.get(f"/chats/{long_chat.pk}/?at=298").content.decode()
    assert shown(last) == list(range(270, 300)) and "/newer/" not in last and "?before=270" in last
    assert 'id="m298" data-index="298" aria-current="location"' in last


@pytest.mark.parametrize(
    ("value", "notice"),
    [
        ("abc", "“abc” is not a message number. Showing the newest messages."),
        ("1.5", "“1.5” is not a message number."),
        ("300", "This chat has no message #300 (its messages are #0 to #299). Showing the newest messages."),
        ("-1", "This chat has no message #-1"),
        ("9" * 40, "This chat has no message #" + "9" * 20 + " "),
        ("<b>x</b>", "“&lt;b&gt;x&lt;/b&gt;” is not a message number."),
    ],
)
def test_a_bad_place_opens_on_the_newest_messages_with_a_notice(web, long_chat, value, notice):
    response = web.get(f"/chats/{long_chat.pk}/", {"at": value})
    page = response.content.decode()
    assert response.status_code == 200
    assert shown(page) == list(range(270, 300))
    assert '<p class="notice place-notice" role="alert">' in page and notice in page
    assert "aria-current" not in page and "/newer/" not in page
    assert "data-at=" not in page  # static/js/chat-page.js opens on the newest


def test_no_place_asked_is_the_newest_messages_without_a_notice(web, long_chat):
    for query in ("", "?at=", "?at=%20"):
        page = web.get(f"/chats/{long_chat.pk}/{query}").content.decode()
        assert shown(page) == list(range(270, 300)), query
        assert "place-notice" not in page and "to-newest" not in page and "/newer/" not in page


def test_an_empty_chat_says_so_when_asked_for_a_message(web, user):
    chat = ChatFactory(user=user)
    page = web.get(f"/chats/{chat.pk}/?at=0").content.decode()
    assert "This chat has no message #0: it has no messages yet." in page and "No messages yet." in page


def test_the_go_to_box_asks_for_a_number_within_the_chat(web, long_chat):
    page = web.get(f"/chats/{long_chat.pk}/").content.decode()
    form = re.search(r'<form method="get" action="/chats/\d+/" class="jump">.*?</form>', page, re.S).group(0)
    assert f'action="/chats/{long_chat.pk}/"' in form
    assert 'name="at" type="number" min="0"' in form and 'max="299"' in form
    assert '<label for="jump-at">Go to message #</label>' in form


def test_another_users_chat_is_404_at_any_place(web, other_user):
    chat = ChatFactory(user=other_user)
    add_messages(chat, 40)
    for path in (f"/chats/{chat.pk}/?at=20", f"/chats/{chat.pk}/?at=x", f"/chats/{chat.pk}/newer/?after=3"):
        assert web.get(path).status_code == 404, path


def test_links_to_a_message_open_the_chat_at_it():
    assert message_url(7, 160) == "/chats/7/?at=160"


def test_the_window_selector_keeps_its_size_near_the_ends(user):
    chat = ChatFactory(user=user)
    add_messages(chat, 10)
    assert [m.index for m in selectors.message_page_around(chat=chat, index=5, limit=4)] == [3, 4, 5, 6]
    assert [m.index for m in selectors.message_page_around(chat=chat, index=0, limit=4)] == [0, 1, 2, 3]
    assert [m.index for m in selectors.message_page_around(chat=chat, index=9, limit=4)] == [6, 7, 8, 9]
    assert [m.index for m in selectors.message_page_around(chat=chat, index=5, limit=30)] == list(range(10))


@pytest.mark.parametrize(
    ("stored", "shown_as"),
    [
        ("2026-01-01T00:00:00.000Z", '<time datetime="2026-01-01T00:00:00+00:00" data-local="datetime"'),
        ("May 1, 2024 12:00pm", '<time datetime="2024-05-01T12:00:00+00:00" data-local="datetime"'),
        (1714564800000, '<time datetime="2024-05-01T12:00:00+00:00" data-local="datetime"'),
        ("the third night", "#0 · the third night</span>"),
    ],
)
def test_a_messages_date_reads_in_the_readers_time_whichever_way_sillytavern_wrote_it(web, user, stored, shown_as):
    chat = ChatFactory(user=user)
    add_messages(chat, 1)
    chat.messages.filter(index=0).update(send_date=stored)
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert shown_as in page
    assert "T00:00:00.000Z</span>" not in page
