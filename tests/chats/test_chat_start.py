import json
import re

import pytest

from apps.chats.models import Chat, Message
from apps.chats.selectors import chat_characters_in_order
from apps.chats.services.characters import character_greetings, character_post_history
from apps.chats.services.personas import persona_create
from apps.chats.services.start import chat_start
from apps.chats.signals import chat_written
from apps.common.exceptions import ApplicationError
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import exported

pytestmark = pytest.mark.django_db

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
def seraphina(user):
    """A character whose card has alternate greetings and post-history instructions, with macros in both styles."""
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Seraphina",
            "first_mes": "*{{char}} tends {{user}}'s wounds.*",
            "alternate_greetings": ["<BOT> smiles at <USER>.", "", "Welcome back, {{User}}."],
            "post_history_instructions": "Stay in character as {{char}}.",
        },
    }
    return CharacterFactory(user=user, name="Seraphina", first_mes=card["data"]["first_mes"], card_data=card)


def test_greetings_and_post_history_come_from_the_card_raw(seraphina, character):
    assert character_greetings(seraphina) == [
        "*{{char}} tends {{user}}'s wounds.*",
        "<BOT> smiles at <USER>.",
        "Welcome back, {{User}}.",
    ]
    assert character_post_history(seraphina) == "Stay in character as {{char}}."
    assert character_post_history(character) == "" and character_greetings(character) == []


def test_a_new_chat_has_sillytaverns_header_and_the_greeting_with_its_swipes(user, seraphina):
    chat = chat_start(user=user, characters=[seraphina])
    header, greeting = exported(chat)
    assert set(header) == {"user_name", "character_name", "create_date", "chat_metadata"}
    assert header["user_name"] == "You" and header["character_name"] == "Seraphina"
    assert ISO_MS.match(header["create_date"])
    assert set(header["chat_metadata"]) == {"integrity"}
    swipes = ["*Seraphina tends You's wounds.*", "Seraphina smiles at You.", "Welcome back, You."]
    assert greeting == {
        "name": "Seraphina",
        "is_user": False,
        "is_system": False,
        "send_date": header["create_date"],
        "mes": swipes[0],
        "extra": {},
        "swipe_id": 0,
        "swipes": swipes,
        "swipe_info": [{"send_date": header["create_date"], "extra": {}}] * 3,
    }
    assert chat.title.startswith("Seraphina - ") and chat.message_count == 1
    assert list(chat.characters.all()) == [seraphina] and chat.reply_order == "natural"


def test_the_default_persona_is_the_user_and_its_name_resolves_the_macros(user, seraphina):
    ash = persona_create(user=user, name="Ash", is_default=True)
    chat = chat_start(user=user, characters=[seraphina])
    assert chat.persona == ash and chat.user_name == "Ash"
    assert Message.objects.get(chat=chat, index=0).mes == "*Seraphina tends Ash's wounds.*"
    rook = persona_create(user=user, name="Rook")
    assert chat_start(user=user, characters=[seraphina], persona=rook).user_name == "Rook"


def test_a_character_without_a_greeting_gives_no_first_message(user, character):
    chat = chat_start(user=user, characters=[character], title="Quiet")
    assert chat.message_count == 0 and chat.title == "Quiet" and exported(chat)[0]["character_name"] == "Mira"


def test_a_card_with_only_alternate_greetings_opens_with_the_first(user):
    card = {"data": {"name": "Alt", "alternate_greetings": ["Hello, {{user}}.", "Hi."]}}
    alt = CharacterFactory(user=user, name="Alt", first_mes="", card_data=card)
    greeting = exported(chat_start(user=user, characters=[alt]))[1]
    assert greeting["mes"] == "Hello, You." and greeting["swipes"] == ["Hello, You.", "Hi."]


def test_a_group_chat_greets_in_the_order_given(user, seraphina, character):
    bram = CharacterFactory(user=user, name="Bram", first_mes="Bram nods at {{user}}.")
    chat = chat_start(user=user, characters=[bram, character, seraphina], reply_order="manual")
    assert [m["name"] for m in exported(chat)[1:]] == ["Bram", "Seraphina"]
    assert exported(chat)[1]["mes"] == "Bram nods at You."
    assert chat_characters_in_order(chat=chat) == [bram, character, seraphina]
    assert chat.character_name == "Bram" and chat.reply_order == "manual"


def test_starting_a_chat_is_a_chat_write(user, seraphina):
    heard = []

    def receiver(sender, chat_id, **kwargs):
        heard.append(chat_id)

    chat_written.connect(receiver)
    try:
        chat = chat_start(user=user, characters=[seraphina])
    finally:
        chat_written.disconnect(receiver)
    assert heard == [chat.pk]
    assert chat.mirrored_integrity is None  # an export gives SillyTavern a slug of its own


@pytest.mark.parametrize(
    ("kwargs", "field"), [({"characters": []}, "characters"), ({"reply_order": "random"}, "reply_order")]
)
def test_a_bad_start_names_the_field_and_makes_no_chat(user, character, kwargs, field):
    with pytest.raises(ApplicationError) as caught:
        chat_start(user=user, **{"characters": [character], **kwargs})
    assert caught.value.extra["field"] == field and not Chat.objects.exists()


def test_the_service_refuses_another_users_character_or_persona(user, other_user, character):
    theirs = CharacterFactory(user=other_user, name="Theirs")
    with pytest.raises(ApplicationError):
        chat_start(user=user, characters=[character, theirs])
    with pytest.raises(ApplicationError):
        chat_start(user=user, characters=[character], persona=persona_create(user=other_user, name="Bo"))
    assert not Chat.objects.exists()


# ----------------------------------------------------------------------------------------------------------- API


def test_the_start_api_answers_the_chat_as_its_detail_api_does(api, user, seraphina, character):
    ash = persona_create(user=user, name="Ash")
    body = {"persona": ash.pk, "title": "Glade", "characters": [character.pk], "reply_order": "manual"}
    response = api.post(f"/api/v1/characters/{seraphina.pk}/chats", body, format="json")
    assert response.status_code == 201
    chat = response.json()
    assert response["Location"] == f"/api/v1/chats/{chat['id']}/"
    assert response["ETag"] == f'"{chat["integrity"]}"'
    assert chat == api.get(response["Location"]).json()
    assert chat["title"] == "Glade" and chat["user_name"] == "Ash" and chat["persona"] == ash.pk
    assert [c["id"] for c in chat["characters"]] and chat["reply_order"] == "manual"
    assert chat["total_messages"] == 1 and chat["character_name"] == "Seraphina"


def test_a_retry_with_the_same_idempotency_key_starts_one_chat(api, seraphina):
    url = f"/api/v1/characters/{seraphina.pk}/chats"
    first = api.post(url, {"title": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    again = api.post(url, {"title": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="start-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again["Location"] == first["Location"]
    assert again["Idempotent-Replayed"] == "true"
    assert Chat.objects.count() == 1


def test_another_users_character_or_persona_is_a_404_and_makes_no_chat(api, other_api, user, other_user, seraphina):
    theirs = CharacterFactory(user=other_user, name="Theirs")
    their_persona = persona_create(user=other_user, name="Bo")
    assert other_api.post(f"/api/v1/characters/{seraphina.pk}/chats", {}, format="json").status_code == 404
    url = f"/api/v1/characters/{seraphina.pk}/chats"
    assert api.post(url, {"characters": [theirs.pk]}, format="json").status_code == 404
    assert api.post(url, {"persona": their_persona.pk}, format="json").status_code == 404
    assert api.post(url, {"characters": [999999]}, format="json").status_code == 404
    assert not Chat.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reply_order": "random"}, "reply_order"),
        ({"characters": "1,2"}, "characters"),
        ({"characters": [0]}, "characters"),
        ({"persona": "ash"}, "persona"),
        ({"title": "x" * 301}, "title"),
    ],
)
def test_bad_start_input_is_a_400_naming_the_field(api, seraphina, body, field):
    response = api.post(f"/api/v1/characters/{seraphina.pk}/chats", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Chat.objects.exists()


# --------------------------------------------------------------------------------------------------------- pages


def test_new_chat_button_starts_the_chat_with_the_chosen_persona(web, user, seraphina):
    ash = persona_create(user=user, name="Ash", is_default=True)
    rook = persona_create(user=user, name="Rook")
    page = web.get(f"/characters/{seraphina.pk}/").content.decode()
    assert "New chat" in page and f'<option value="{ash.pk}" selected>' in page
    response = web.post(f"/characters/{seraphina.pk}/chats/new/", {"persona": rook.pk})
    chat = Chat.objects.get(user=user)
    assert response.status_code == 302 and response.url == f"/chats/{chat.pk}/"
    assert chat.persona == rook and chat.user_name == "Rook"


def test_the_characters_list_starts_a_group_chat(web, user, seraphina, character):
    page = web.get("/characters/").content.decode()
    assert 'form="group-chat"' in page and "Start group chat" in page
    body = {"characters": [character.pk, seraphina.pk], "reply_order": "manual", "title": "Both", "persona": ""}
    response = web.post("/characters/group-chat/", body)
    chat = Chat.objects.get(user=user)
    assert response.url == f"/chats/{chat.pk}/" and chat.title == "Both" and chat.reply_order == "manual"
    assert chat_characters_in_order(chat=chat) == [character, seraphina]


def test_a_group_chat_needs_ticked_characters_and_only_ones_own(web, other_user, character):
    response = web.post("/characters/group-chat/", {"reply_order": "natural"}, follow=True)
    assert "Tick the characters" in response.content.decode() and not Chat.objects.exists()
    theirs = CharacterFactory(user=other_user, name="Theirs")
    assert web.post("/characters/group-chat/", {"characters": [character.pk, theirs.pk]}).status_code == 404
    assert web.post(f"/characters/{theirs.pk}/chats/new/", {}).status_code == 404
    assert not Chat.objects.exists()


def test_the_reply_order_is_changed_through_the_chat_api(api, user, seraphina, character):
    chat = chat_start(user=user, characters=[seraphina, character])
    url = f"/api/v1/chats/{chat.pk}/"
    bad = api.patch(url, {"reply_order": "random"}, format="json", HTTP_IF_MATCH=f'"{chat.integrity}"')
    assert bad.status_code == 400 and "reply_order" in bad.json()
    assert Chat.objects.get(pk=chat.pk).reply_order == "natural"
    response = api.patch(url, {"reply_order": "manual"}, format="json", HTTP_IF_MATCH=f'"{chat.integrity}"')
    assert response.status_code == 200 and response.json()["reply_order"] == "manual"


def test_a_groups_reply_order_is_changed_on_its_page(web, client, user, other_user, seraphina, character):
    """It was set only when the group was started; the chat panel changes it (a group's only: one character needs
    no order). A choice there is not is a 400 naming the field; another person's chat is a 404."""
    group = chat_start(user=user, characters=[seraphina, character], reply_order="natural")
    alone = chat_start(user=user, characters=[character])
    assert f"/chats/{group.pk}/reply-order/" in web.get(f"/chats/{group.pk}/").content.decode()
    assert "/reply-order/" not in web.get(f"/chats/{alone.pk}/").content.decode()
    fragment = web.get(f"/chats/{group.pk}/reply-order/").content.decode()
    assert '<option value="natural" selected>' in fragment and "<html" not in fragment
    response = web.post(f"/chats/{group.pk}/reply-order/", {"reply_order": "manual"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Saved" in response.content.decode()
    assert json.loads(response["HX-Trigger"]) == {"lorekeeper:reply-order": {"order": "manual"}}  # to the composer
    assert Chat.objects.get(pk=group.pk).reply_order == "manual"
    refused = web.post(f"/chats/{group.pk}/reply-order/", {"reply_order": "shuffle"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 400 and 'class="field-error"' in refused.content.decode()
    assert "HX-Trigger" not in refused
    assert Chat.objects.get(pk=group.pk).reply_order == "manual"
    client.force_login(other_user)
    assert client.post(f"/chats/{group.pk}/reply-order/", {"reply_order": "natural"}).status_code == 404
    assert Chat.objects.get(pk=group.pk).reply_order == "manual"
