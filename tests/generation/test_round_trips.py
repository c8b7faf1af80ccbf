"""A reply's preparation talks to the database once for what it reads once: the chat's characters are read by the
preparation and handed on to who replies next, the context build and the recall search, not read by each again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.services.generate import generation_prepare

pytestmark = pytest.mark.django_db


def test_the_chats_characters_are_read_once_for_a_reply(user, character, scripted, llm):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    line = {"name": "Mira", "is_user": False, "mes": "The lantern is lit."}
    chat = chat_append(chat=chat, messages=[line], integrity=chat.integrity).chat
    with CaptureQueriesContext(connection) as queries:
        prepared = generation_prepare(user=user, chat=chat, message="Any ships in the harbour?")
    assert prepared.generation.character_name == character.name
    assert prepared.generation.prompt_info["recall"] is not None  # the recall search ran, in the chat's scope
    reads = [q["sql"] for q in queries.captured_queries if '"chats_chat_characters"' in q["sql"]]
    assert len(reads) == 1, reads
