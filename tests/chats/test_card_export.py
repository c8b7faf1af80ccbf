import base64
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.chats.models import Character
from apps.chats.services.avatars import character_avatar_set
from apps.chats.services.card_export import card_png, card_v2
from apps.chats.services.cards import card_fields, card_parse, character_import_card
from apps.chats.services.characters import character_update
from apps.chats.services.png import png_chunks, png_text_chunks, png_with_card
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import SERAPHINA_CARD, image_bytes, pixels

pytestmark = pytest.mark.django_db

CARD = {
    **SERAPHINA_CARD,
    "data": {
        **SERAPHINA_CARD["data"],
        "system_prompt": "You are {{char}}.",
        "post_history_instructions": "Stay gentle.",
        "x_unknown_field": {"kept": True},
    },
}
SAME_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example", "system_prompt")


def imported(user, data: bytes) -> Character:
    return character_import_card(user=user, stream=io.BytesIO(data))


def the_same(a: Character, b: Character) -> bool:
    fields = (*SAME_FIELDS, "creator_notes", "tags")
    return all(getattr(a, field) == getattr(b, field) for field in fields)


def test_an_imported_v2_card_exports_as_it_came(user):
    character = imported(user, json.dumps(CARD).encode())
    assert card_v2(character=character) == CARD


def test_the_export_carries_the_characters_fields_as_edited(user):
    character = imported(user, json.dumps(CARD).encode())
    character_update(character=character, data={"description": "Changed.", "tags": ["x"]})
    card = card_v2(character=Character.objects.get(pk=character.pk))
    assert card["data"]["description"] == "Changed." and card["data"]["tags"] == ["x"]
    assert card["data"]["character_book"] == CARD["data"]["character_book"]


def test_a_v1_card_or_a_character_without_one_exports_as_v2(user):
    v1 = {"name": "Aqua", "description": "Goddess.", "first_mes": "Hi!", "talkativeness": "0.5", "fav": False}
    card = card_v2(character=imported(user, json.dumps(v1).encode()))
    assert (card["spec"], card["spec_version"]) == ("chara_card_v2", "2.0")
    assert card["data"]["description"] == "Goddess." and card["data"]["alternate_greetings"] == []
    assert card["data"]["extensions"] == {"talkativeness": "0.5", "fav": False}
    plain = card_v2(character=CharacterFactory(user=user, name="Plain"))
    assert "character_book" not in plain["data"] and plain["data"]["post_history_instructions"] == ""
    assert set(plain["data"]) >= {"name", "creator", "character_version", "extensions", "tags", "system_prompt"}


def test_png_card_round_trip_gives_the_same_character_and_picture(user, media):
    picture = image_bytes("PNG", size=(20, 30), colour=(10, 120, 200))
    stale = {**CARD, "spec": "chara_card_v3", "data": {**CARD["data"], "name": "Stale"}}
    first = imported(user, png_with_card(picture, base64.b64encode(json.dumps(stale).encode())))
    character_update(character=first, data={"name": "Seraphina", "personality": "stern"})
    first = Character.objects.get(pk=first.pk)

    exported = card_png(character=first)
    assert set(png_text_chunks(exported)) == {b"chara"}  # one card, no stale ccv3 beside it
    assert [kind for kind, _ in png_chunks(exported)][-2:] == [b"tEXt", b"IEND"]
    again = imported(user, exported)
    assert the_same(first, again) and again.personality == "stern"
    assert again.card_data == card_v2(character=first) == card_parse(exported)
    assert pixels(again.avatar.read()) == pixels(picture)


def test_png_export_of_a_character_without_avatar_is_a_placeholder(user):
    character = CharacterFactory(user=user, name="Plain", first_mes="Hi.")
    exported = card_png(character=character)
    assert card_fields(card_parse(exported))["first_mes"] == "Hi."
    assert pixels(exported)[0] == (400, 600)


def test_a_jpeg_avatar_is_made_a_png_card(user, media):
    character = CharacterFactory(user=user, name="Jay")
    character_avatar_set(character=character, data=image_bytes("JPEG", size=(16, 16)))
    exported = card_png(character=character)
    assert exported.startswith(b"\x89PNG") and pixels(exported)[0] == (16, 16)
    assert card_parse(exported)["data"]["name"] == "Jay"


def test_card_export_api(api, other_api, user, media):
    character = imported(user, json.dumps(CARD).encode())
    response = api.get(f"/api/v1/characters/{character.pk}/card.json")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    assert json.loads(response.content) == CARD and "Seraphina.json" in response["Content-Disposition"]
    png = api.get(f"/api/v1/characters/{character.pk}/card.png", HTTP_ACCEPT="text/html")
    assert png.status_code == 200 and png["Content-Type"] == "image/png" and png.content.startswith(b"\x89PNG")
    for suffix in ("png", "json"):
        assert other_api.get(f"/api/v1/characters/{character.pk}/card.{suffix}").status_code == 404


def test_export_then_import_through_the_api_gives_the_same_character(api, user, media):
    character = imported(user, json.dumps(CARD).encode())
    character_avatar_set(character=character, data=image_bytes("WEBP", size=(12, 12)))
    png = api.get(f"/api/v1/characters/{character.pk}/card.png").content
    response = api.post(
        "/api/v1/characters/import", {"file": SimpleUploadedFile("s.png", png, "image/png")}, format="multipart"
    )
    assert response.status_code == 201
    again = Character.objects.get(pk=response.json()["id"])
    assert the_same(character, again) and again.card_data == CARD
    assert response.json()["avatar"] == f"/characters/{again.pk}/avatar"


def test_the_character_page_has_the_download_buttons(web, user):
    character = CharacterFactory(user=user, name="Plain")
    page = web.get(f"/characters/{character.pk}/").content.decode()
    assert f"/api/v1/characters/{character.pk}/card.png" in page
    assert f"/api/v1/characters/{character.pk}/card.json" in page
    assert web.get(f"/api/v1/characters/{character.pk}/card.json").status_code == 200  # signed in on the site


def test_a_flat_card_whose_extensions_are_not_an_object_still_exports(user):
    character = CharacterFactory(user=user, name="Odd", card_data={"name": "Odd", "extensions": 1, "fav": True})
    card = card_v2(character=character)
    assert card["data"]["name"] == "Odd" and card["data"]["extensions"]["fav"] is True
