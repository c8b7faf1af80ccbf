"""The chat page's composer (apps/generation/views/chat.py): what it offers for this chat."""

import pytest

from apps.chats.services.start import chat_start
from apps.llm.services import connection_create
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


def test_options_open_only_when_there_is_something_to_choose(web, user, llm):
    mira = CharacterFactory(user=user, name="Mira")
    alone = chat_start(user=user, characters=[mira])
    composer = web.get(f"/chats/{alone.pk}/composer/").content.decode()
    assert 'id="composer"' in composer and "composer-more" not in composer  # one character, one model

    hale = CharacterFactory(user=user, name="Hale")
    group = chat_start(user=user, characters=[mira, hale])
    composer = web.get(f"/chats/{group.pk}/composer/").content.decode()
    assert "composer-more" in composer and "Who replies" in composer and "Model" not in composer.split("Options")[1]

    connection_create(user=user, name="second", base_url=llm.server.url, model="other", api_key="sk-" + "y" * 20)
    composer = web.get(f"/chats/{alone.pk}/composer/").content.decode()
    assert "composer-more" in composer and "Who replies" not in composer and "second (other)" in composer
