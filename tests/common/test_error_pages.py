"""People meet the site's own error pages, in its look and in plain words; clients of the API meet JSON; and the
landing page says what Lorekeeper is to someone signed out."""

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


@override_settings(DEBUG=False)
def test_an_unknown_page_answers_the_sites_404_in_plain_words(web):
    response = web.get("/no/such/page/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "There is nothing here" in page and 'class="topbar"' in page and "favicon.svg" in page
    assert "Traceback" not in page and "URLconf" not in page


@override_settings(DEBUG=False)
def test_an_unknown_api_address_answers_json(api):
    response = api.get("/api/v1/no-such-endpoint")
    assert response.status_code == 404 and response.json()["message"] == "There is nothing here."


@override_settings(DEBUG=False)
def test_another_users_chat_is_a_404_page_in_the_sites_look(web, other_user):
    from apps.chats.services.chats import chat_create

    theirs = chat_create(user=other_user, title="Not yours")
    response = web.get(f"/chats/{theirs.pk}/")
    assert response.status_code == 404 and "There is nothing here" in response.content.decode()


def test_the_landing_page_says_what_lorekeeper_is_and_how_to_start(client):
    page = client.get("/").content.decode()
    assert "Lorekeeper remembers your story for the model" in page and "How to start" in page
    assert 'href="/accounts/login/' in page


def test_the_server_error_page_has_the_sites_look_and_needs_no_template():
    from apps.common.views import plain_page

    page = plain_page("Server error", "Something went wrong on our side.")
    assert 'class="topbar"' in page and "Back to your chats" in page


def test_no_template_comment_spans_lines_where_django_would_print_it():
    """Django's {# #} holds one line: one that spans lines is shown on the page as text."""
    import re
    from pathlib import Path

    from django.conf import settings

    shown = [
        str(path)
        for path in Path(settings.BASE_DIR, "templates").rglob("*.html")
        if re.search(r"\{#(?:(?!#\}).)*\n", path.read_text())
    ]
    assert shown == []


def test_a_moment_is_written_for_the_browser_to_show_in_the_readers_zone():
    from datetime import UTC, datetime

    from apps.common.templatetags.local_time import local_time

    html = str(local_time(datetime(2026, 11, 23, 4, 5, 6, tzinfo=UTC), "seconds"))
    assert html.startswith('<time datetime="2026-11-23T04:05:06+00:00" data-local="seconds"')
    assert ">2026-11-23 04:05:06</time>" in html and local_time(None) == ""
