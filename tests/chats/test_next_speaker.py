import pytest

from apps.chats.services.chats import chat_lock, message_lines_append
from apps.chats.services.start import chat_start, next_speaker
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def trio(user):
    """Three characters who never greet, so the chat starts empty."""
    return [CharacterFactory(user=user, name=name, first_mes="") for name in ("Ann", "Bram", "Ann Marie")]


def said(chat, *names: str):
    """Messages from these speakers ("You": the person)."""
    lines = [{"name": name, "is_user": name == "You", "is_system": False, "mes": f"{name} speaks."} for name in names]
    return message_lines_append(chat=chat_lock(chat=chat), lines=lines)


def test_one_character_always_replies(user, character):
    chat = chat_start(user=user, characters=[character])
    assert next_speaker(chat=chat, text="Anyone?") == character
    assert next_speaker(chat=said(chat, "Mira"), exclude_last=True) == character


def test_a_chat_without_characters_has_no_speaker(user, mira_chat, character):
    mira_chat.characters.clear()
    assert next_speaker(chat=mira_chat) is None


def test_a_new_group_starts_with_the_first_character(user, trio):
    assert next_speaker(chat=chat_start(user=user, characters=trio)) == trio[0]


def test_in_turn_the_one_after_the_last_speaker_replies(user, trio):
    ann, bram, marie = trio
    chat = chat_start(user=user, characters=trio)
    assert next_speaker(chat=said(chat, "Ann", "You")) == bram
    assert next_speaker(chat=said(chat, "Bram")) == marie
    assert next_speaker(chat=said(chat, "Ann Marie", "You")) == ann  # round again


def test_the_character_named_first_in_the_message_replies(user, trio):
    ann, bram, marie = trio
    chat = said(chat_start(user=user, characters=trio), "Ann")
    assert next_speaker(chat=chat, text="Well, bram? And you, Ann?") == bram
    assert next_speaker(chat=chat, text="ANN MARIE, what do you think?") == marie  # the longer name at one place
    assert next_speaker(chat=chat, text="Brambles everywhere, Annie.") == bram  # whole words only: in turn


def test_exclude_last_skips_the_last_speaker_when_named(user, trio):
    ann, bram, _ = trio
    chat = said(chat_start(user=user, characters=trio), "Ann")
    assert next_speaker(chat=chat, text="Ann, then Bram.") == ann
    assert next_speaker(chat=chat, text="Ann, then Bram.", exclude_last=True) == bram
    assert next_speaker(chat=chat, text="Ann?", exclude_last=True) == bram  # in turn


def test_a_group_in_manual_order_waits_for_the_person_to_choose(user, trio):
    chat = chat_start(user=user, characters=trio, reply_order="manual")
    assert next_speaker(chat=chat, text="Ann?") is None


def test_messages_of_names_outside_the_group_are_not_turns(user, trio):
    chat = said(chat_start(user=user, characters=trio), "Bram", "Narrator")
    assert next_speaker(chat=chat) == trio[2]
