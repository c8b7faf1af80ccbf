"""A reply's preparation talks to the database once for what it reads once: the chat's characters are read by the
preparation and handed on to who replies next, the context build and the recall search, not read by each again; a
connection the caller already chose (the gateway, by the request's model) is not read again, and one of another
person's is not found; the chat's owner is not read again to compose the prompt."""

from __future__ import annotations

import pytest
from django.db import connection
from django.http import Http404
from django.test.utils import CaptureQueriesContext

from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.models import Generation
from apps.generation.services.generate import generation_prepare
from apps.llm.services import connection_create

pytestmark = pytest.mark.django_db


def test_the_chats_characters_are_read_once_for_a_reply(user, character, scripted, llm):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    line = {"name": "Mira", "is_user": False, "mes": "The lantern is lit."}
    chat = chat_append(chat=chat, messages=[line], integrity=chat.integrity).chat
    with CaptureQueriesContext(connection) as queries:
        prepared = generation_prepare(user=user, chat=chat, message="Any ships in the harbour?")
    assert prepared.generation.character_name == character.name
    sql = [q["sql"] for q in queries.captured_queries]
    # The recall search ran, in the chat's scope, on the characters the preparation read.
    assert any(f"m.chat_id = {chat.pk} OR (m.chat_id IS NULL AND m.character_id = ANY" in q for q in sql)
    reads = [q for q in sql if '"chats_chat_characters"' in q]
    assert len(reads) == 1, reads


def test_a_connection_the_caller_chose_is_not_read_again(user, character, scripted, llm):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    with CaptureQueriesContext(connection) as queries:
        prepared = generation_prepare(user=user, chat=chat, message="Any ships?", connection=llm)
    assert prepared.generation.connection == llm
    assert not [q["sql"] for q in queries.captured_queries if 'FROM "llm_connection"' in q["sql"]]


def test_another_persons_connection_handed_in_is_not_found(user, other_user, character, llm):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    theirs = connection_create(user=other_user, name="theirs", base_url=llm.base_url, model="m", api_key="sk-x")
    with pytest.raises(Http404):
        generation_prepare(user=user, chat=chat, message="Any ships?", connection=theirs)
    assert not Generation.objects.filter(chat=chat).exists()


def test_the_chats_owner_is_not_read_again_to_compose_the_prompt(user, character, scripted, llm):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    with CaptureQueriesContext(connection) as queries:
        generation_prepare(user=user, chat=chat, message="Any ships?")
    assert not [q["sql"] for q in queries.captured_queries if 'FROM "auth_user"' in q["sql"]]
