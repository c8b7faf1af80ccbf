"""Default chat titles (SillyTavern file names) shown as "Mira, 23 Nov 2026, 14:49" on the pages, the stored title
and the export's file name unchanged."""

from datetime import UTC, datetime, timedelta

import pytest

from apps.chats.services.branch import chat_branch
from apps.chats.services.chats import chat_create
from apps.chats.services.start import chat_start
from apps.chats.services.writes import chat_append
from apps.chats.titles import file_name_title, title_shown

pytestmark = pytest.mark.django_db

FILE_NAME = "Mira - 2026-11-23@14h49m06s448ms"


@pytest.mark.parametrize(
    ("title", "shown"),
    [
        (FILE_NAME, "Mira, 23 Nov 2026, 14:49"),
        ("Mira - 2026-5-1@09h03m07s042ms", "Mira, 1 May 2026, 09:03"),  # as Lorekeeper starts one: unpadded
        ("Mira - 2023-05-06 @14h 49m 06s 448ms", "Mira, 6 May 2023, 14:49"),  # SillyTavern before 1.10
        ("Mira - 2026-11-23@14h49m06s", "Mira, 23 Nov 2026, 14:49"),  # no milliseconds
        (f"{FILE_NAME} (branch)", "Mira, 23 Nov 2026, 14:49 (branch)"),  # a branch Lorekeeper made of one, before
        (f"{FILE_NAME} (branch at #12)", "Mira, 23 Nov 2026, 14:49 (branch at #12)"),  # and since
        ("Branch #12 - Mira - 2026-11-23@14h49m06s448ms.jsonl", "Branch #12 - Mira, 23 Nov 2026, 14:49"),
        ("Mira, Bram - 2026-11-23@14h49m06s448ms", "Mira, Bram, 23 Nov 2026, 14:49"),
        ("Mira - 2026-13-40@14h49m06s448ms", "Mira - 2026-13-40@14h49m06s448ms"),  # no such day: as it is
        ("The lighthouse - chapter 2", "The lighthouse - chapter 2"),
        ("2026-11-23@14h49m06s448ms", "2026-11-23@14h49m06s448ms"),  # no names
    ],
)
def test_a_file_name_title_is_shown_as_names_and_the_minute(title, shown):
    assert title_shown(title) == shown


def test_a_title_written_when_the_chat_was_made_is_read_as_utc():
    made = datetime(2026, 11, 23, 14, 49, 7, tzinfo=UTC)
    assert file_name_title(FILE_NAME, made).utc is True
    assert file_name_title(FILE_NAME, made + timedelta(hours=5)).utc is False  # imported later: its writer's clock
    assert file_name_title(FILE_NAME).utc is False


def test_the_chat_pages_show_the_title_and_keep_the_file_name_for_the_export(web, user, character):
    chat = chat_create(user=user, title=FILE_NAME, character_ids=[character.pk])
    listed = web.get("/chats/").content.decode()
    assert "Mira, 23 Nov 2026, 14:49</a>" in listed and FILE_NAME not in listed
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "<h1>Mira, 23 Nov 2026, 14:49</h1>" in page
    assert "<title>Mira, 23 Nov 2026, 14:49 · Lorekeeper</title>" in page
    assert "Mira, 23 Nov 2026, 14:49</a>" in web.get(f"/characters/{character.pk}/").content.decode()
    chat.refresh_from_db()
    assert chat.title == FILE_NAME
    exported = web.get(f"/chats/{chat.pk}/export/")
    assert f'filename="{FILE_NAME}.jsonl"' in exported["Content-Disposition"]


def test_a_branch_of_a_chat_lorekeeper_started_shows_its_moment_and_that_it_is_a_branch(web, user, character):
    started = chat_start(user=user, characters=[character])
    hi = [{"name": "Rowan", "is_user": True, "mes": "Hi"}]
    started = chat_append(chat=started, messages=hi, integrity=started.integrity).chat
    chat = chat_branch(chat=started, index=0)
    moment = file_name_title(chat.title).moment.replace(tzinfo=UTC)
    html = web.get("/chats/").content.decode()
    assert f'{character.name}, <time datetime="{moment.isoformat()}" data-local="title"' in html
    assert " UTC</time> (branch at #0)</a>" in html and chat.title not in html.replace(f'title="{chat.title}"', "")


def test_a_chat_lorekeeper_started_shows_its_moment_in_the_readers_zone(web, user, character):
    chat = chat_start(user=user, characters=[character])
    moment = file_name_title(chat.title).moment.replace(tzinfo=UTC)
    html = web.get(f"/chats/{chat.pk}/").content.decode()
    assert f'<h1>{character.name}, <time datetime="{moment.isoformat()}" data-local="title"' in html
    assert f'title="{chat.title}"' in html  # the file name, on hover


@pytest.mark.slow  # about 7 s: .ci/run runs it after make test
def test_the_pages_of_a_chat_elsewhere_show_its_title_not_the_file_name(web, user, character):
    chat = chat_create(user=user, title=FILE_NAME, character_ids=[character.pk])
    for path in (f"/chats/{chat.pk}/memories/", f"/chats/{chat.pk}/search/?q=lantern", f"/chats/{chat.pk}/context/",
                 f"/chats/{chat.pk}/story/"):  # fmt: skip
        page = web.get(path)
        assert page.status_code == 200, path
        html = page.content.decode()
        assert "Mira, 23 Nov 2026, 14:49" in html and FILE_NAME not in html, path
