"""Avatars, personas and the reply order (apps/chats/migrations/0007) only add: a database holding characters, chats
and messages keeps every row as it was, each with an empty avatar, no persona and the natural reply order."""

import pytest

from apps.chats.models import Character, Chat, Message
from tests.migrating import leaves, migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("chats", "0006_write_path_content_types")]


def test_characters_and_chats_keep_their_rows_through_the_migration(user):
    today = leaves()
    old = migrate(BEFORE).loader.project_state(BEFORE).apps
    character = old.get_model("chats", "Character").objects.create(
        user_id=user.pk, name="Mira", description="A clerk.", card_data={"data": {"name": "Mira"}}
    )
    chat = old.get_model("chats", "Chat").objects.create(
        user_id=user.pk, title="Kept", user_name="Ash", message_count=1
    )
    chat.characters.add(character)
    old.get_model("chats", "Message").objects.create(chat_id=chat.pk, index=0, name="Mira", mes="Hello.")

    migrate(today)
    character, chat = Character.objects.get(pk=character.pk), Chat.objects.get(pk=chat.pk)
    assert (character.name, character.description, character.card_data) == (
        "Mira",
        "A clerk.",
        {"data": {"name": "Mira"}},
    )
    assert not character.avatar
    assert (chat.title, chat.user_name, chat.persona, chat.reply_order) == ("Kept", "Ash", None, "natural")
    assert list(chat.characters.all()) == [character]
    assert Message.objects.get(chat=chat, index=0).mes == "Hello."
