"""The character editor's alternate greetings and post-history instructions: kept in the card (the `data` of a V2/V3
card, else the flat card), shown again, exported, and used when a chat starts."""

import json

import pytest

from apps.chats.forms import MAX_ALTERNATE_GREETINGS
from apps.chats.models import Character
from apps.chats.services.card_export import card_png, card_v2
from apps.chats.services.cards import card_parse
from apps.chats.services.characters import character_card_fields, character_create, character_update
from apps.chats.services.start import greeting_line
from apps.common.exceptions import ApplicationError
from tests.chats.factories import CharacterFactory
from tests.chats.test_card_export import CARD, imported

pytestmark = pytest.mark.django_db

FIELDS = {"name": "Mira", "first_mes": "Evening, {{user}}.", "description": "", "personality": "", "scenario": ""}


def post(web, url, **fields):
    data = {"mes_example": "", "system_prompt": "", "creator_notes": "", "tags": "", **FIELDS, **fields}
    return web.post(url, data)


def test_update_puts_the_card_only_fields_in_a_v2_cards_data_and_keeps_the_rest(user):
    character = imported(user, json.dumps(CARD).encode())
    character_update(
        character=character,
        data={"alternate_greetings": ["Hi.", "Hello."], "post_history_instructions": "Be brief."},
    )
    card = Character.objects.get(pk=character.pk).card_data
    assert card["data"]["alternate_greetings"] == ["Hi.", "Hello."]
    assert card["data"]["post_history_instructions"] == "Be brief."
    assert card["data"]["x_unknown_field"] == {"kept": True} and card["spec"] == CARD["spec"]
    assert "alternate_greetings" not in card  # in the data, not beside it


def test_saving_unchanged_empty_fields_leaves_an_imported_card_as_it_was(user):
    flat = {"name": "Aqua", "description": "Goddess."}
    character = imported(user, json.dumps(flat).encode())
    character_update(character=character, data={"alternate_greetings": [], "post_history_instructions": ""})
    assert Character.objects.get(pk=character.pk).card_data == flat


def test_a_character_without_a_card_gets_them_and_the_editor_shows_them_again(user):
    character = character_create(user=user, name="Mira", alternate_greetings=["Hi."], post_history_instructions="X")
    assert character.card_data == {"alternate_greetings": ["Hi."], "post_history_instructions": "X"}
    assert character_card_fields(character) == {"alternate_greetings": ["Hi."], "post_history_instructions": "X"}


def test_the_service_refuses_greetings_that_are_not_a_list_of_strings(user):
    character = CharacterFactory(user=user)
    with pytest.raises(ApplicationError) as refused:
        character_update(character=character, data={"alternate_greetings": "Hi."})
    assert refused.value.extra == {"field": "alternate_greetings"}


def test_the_editor_saves_and_shows_alternate_greetings_and_post_history_instructions(web, user):
    response = post(
        web,
        "/characters/new/",
        alternate_greetings=["Hi, {{user}}.", "  ", "Back again?"],
        post_history_instructions="Stay in character.",
    )
    character = Character.objects.get(user=user, name="Mira")
    assert response.status_code == 302
    assert character_card_fields(character) == {
        "alternate_greetings": ["Hi, {{user}}.", "Back again?"],  # the empty box is dropped
        "post_history_instructions": "Stay in character.",
    }
    html = web.get(f"/characters/{character.pk}/").content.decode()
    assert ">\nHi, {{user}}.</textarea>" in html and ">\nBack again?</textarea>" in html
    assert 'aria-label="Alternate greeting (new)"' in html  # a box for one more
    assert "Stay in character.</textarea>" in html

    post(web, f"/characters/{character.pk}/", alternate_greetings=["Back again?", ""], post_history_instructions="")
    character.refresh_from_db()
    assert character_card_fields(character) == {
        "alternate_greetings": ["Back again?"],
        "post_history_instructions": "",
    }


def test_the_editor_names_the_field_when_there_are_too_many_greetings(web, user):
    response = post(
        web, "/characters/new/", alternate_greetings=[f"Hi {n}." for n in range(MAX_ALTERNATE_GREETINGS + 1)]
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Alternate greetings: at most {MAX_ALTERNATE_GREETINGS}, not {MAX_ALTERNATE_GREETINGS + 1}." in html
    assert not Character.objects.filter(user=user).exists()


def test_a_greeting_with_a_nul_character_is_refused_on_the_form(web, user):
    """PostgreSQL cannot store one: the card's JSON was refused by it, a server error, on the new and edit forms."""
    response = post(web, "/characters/new/", alternate_greetings=["a\x00b"])
    assert response.status_code == 200
    assert "Alternate greetings: a NUL character cannot be stored." in response.content.decode()
    assert not Character.objects.filter(user=user).exists()
    character = CharacterFactory(user=user, name="Mira")
    response = post(web, f"/characters/{character.pk}/", alternate_greetings=["a\x00b"])
    assert "Alternate greetings: a NUL character cannot be stored." in response.content.decode()


def test_edited_greetings_and_instructions_round_trip_through_the_png_and_json_cards(user, media):
    character = imported(user, json.dumps(CARD).encode())
    character_update(
        character=character, data={"alternate_greetings": ["A.", "B."], "post_history_instructions": "P."}
    )
    character = Character.objects.get(pk=character.pk)
    assert card_v2(character=character)["data"]["alternate_greetings"] == ["A.", "B."]
    again = imported(user, card_png(character=character))
    assert character_card_fields(again) == {"alternate_greetings": ["A.", "B."], "post_history_instructions": "P."}
    assert card_parse(card_png(character=again))["data"]["post_history_instructions"] == "P."


def test_edited_alternate_greetings_become_swipes_of_a_new_chats_greeting(user):
    character = character_create(user=user, name="Mira", first_mes="Evening.", alternate_greetings=["Hi, {{user}}."])
    line = greeting_line(character=character, user_name="Rowan", sent="now")
    assert line["mes"] == "Evening." and line["swipes"] == ["Evening.", "Hi, Rowan."]
