"""Chat selectors read only the requesting user's chats."""

import pytest
from django.http import Http404

from apps.chats.selectors import chat_character_ids
from apps.chats.services.chats import chat_characters_set, chat_create
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


def test_a_chats_character_ids_come_in_the_order_they_were_linked_and_only_to_its_owner(user, other_user):
    mira, corvin = CharacterFactory(user=user, name="Mira"), CharacterFactory(user=user, name="Corvin")
    group = chat_create(user=user, title="Group")
    chat_characters_set(chat=group, characters=[corvin, mira])
    alone = chat_create(user=user, title="Alone")

    assert chat_character_ids(user=user, chat_id=group.pk) == [corvin.pk, mira.pk]
    assert chat_character_ids(user=user, chat_id=alone.pk) == []  # a chat without characters is still theirs
    for chat_id in (group.pk, alone.pk):
        with pytest.raises(Http404):
            chat_character_ids(user=other_user, chat_id=chat_id)
    for missing in (10**9, 10**20):  # past the id column's range: none such, not an error
        with pytest.raises(Http404):
            chat_character_ids(user=user, chat_id=missing)
