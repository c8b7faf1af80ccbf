"""Which chat a conversation is when the person edited its opening: the same story (recognised by a message after
their first one, word for word) stays in its chat; another story of the same card does not merge into it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat
from apps.gateway.services.match import chat_for_request, fingerprint
from apps.gateway.services.request import Line
from apps.gateway.services.sync import history_sync

pytestmark = pytest.mark.django_db

SYSTEM = Line("system", "Write Mira's next reply in a fictional chat between Mira and Rowan.")
GREETING = Line("assistant", "The lantern is lit.")


def story(first: str, reply: str, *more: Line) -> list[Line]:
    return [SYSTEM, GREETING, Line("user", first), Line("assistant", reply), *more]


def stored(user, lines: list[Line]) -> Chat:
    found = chat_for_request(user=user, lines=lines)
    return history_sync(chat=found.chat, lines=lines, start=found.start).chat


def test_an_edited_first_message_stays_in_its_story_and_becomes_its_key(user):
    reply, then = "One came in at dawn, sails torn.", Line("user", "Which?")
    chat = stored(user, story("Any ships?", reply, then))
    edited = story("Any ships tonight, Mira?", reply, then, Line("user", "And then?"))
    found = chat_for_request(user=user, lines=edited)
    assert (found.chat.pk, found.how) == (chat.pk, "edited")
    assert Chat.objects.get(pk=chat.pk).client_key == fingerprint(edited)
    assert chat_for_request(user=user, lines=edited).how == "fingerprint"  # found directly from now on
    assert Chat.objects.count() == 1


def test_another_story_of_the_same_card_is_not_merged(user):
    chat = stored(user, story("Any ships?", "One, at dawn."))
    other = chat_for_request(user=user, lines=story("A room for the night, please.", "Up the stairs, second door."))
    assert other.how == "new" and other.chat.pk != chat.pk


def test_an_edited_opening_with_nothing_after_it_starts_a_new_chat(user):
    chat = stored(user, story("Any ships?", "One, at dawn."))
    found = chat_for_request(user=user, lines=[SYSTEM, GREETING, Line("user", "Any ships tonight?")])
    assert found.how == "new" and found.chat.pk != chat.pk


def test_a_short_message_both_stories_share_does_not_merge_them(user):
    ok, dots = Line("user", "ok"), Line("assistant", "...")
    chat = stored(user, story("Any ships?", "One, at dawn, her sails torn.", ok, dots))
    other = story("A room, please.", "Up the stairs, second door.", ok, dots)
    found = chat_for_request(user=user, lines=[*other, Line("user", "Thanks.")])
    assert found.how == "new" and found.chat.pk != chat.pk


def test_a_chat_named_by_its_id_is_found_in_two_reads(user):
    """The chat and its first message (whether the history was trimmed); not its characters, which the sync that
    locks the chat next would drop unread."""
    lines = story("A room for the night, please.", "Up the stairs, second door.")
    chat = chat_for_request(user=user, lines=lines).chat
    history_sync(chat=chat, lines=lines, start=0)
    with CaptureQueriesContext(connection) as queries:
        found = chat_for_request(user=user, lines=lines, header=str(chat.pk))
    assert (found.chat.pk, found.how, found.start) == (chat.pk, "header", 0)
    reads = [query["sql"] for query in queries.captured_queries if query["sql"].startswith("SELECT")]
    assert [sql.split(" FROM ")[1].split()[0] for sql in reads] == ['"chats_chat"', '"chats_message"']


def test_a_header_of_a_superscript_digit_is_a_client_key_not_an_id(user):
    """A superscript "²" is a digit to str.isdigit but not to int(): the header raised ValueError (a server error)."""
    lines = story("A room for the night, please.", "Up the stairs, second door.")
    found = chat_for_request(user=user, lines=lines, header="²")
    assert found.chat.client_key == "²" and found.chat.user_id == user.pk
