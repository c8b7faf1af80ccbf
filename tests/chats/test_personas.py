import pytest
from django.db import IntegrityError

from apps.chats.models import Chat, Persona
from apps.chats.services.personas import persona_create, persona_default, persona_delete, persona_update
from apps.chats.services.start import chat_start
from apps.common.exceptions import ApplicationError
from tests.chats.helpers import fresh, if_match

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------------------------------------------ services


def test_making_a_persona_the_default_unmakes_the_one_that_was(user):
    ash = persona_create(user=user, name="Ash", is_default=True)
    assert persona_default(user=user) == ash
    rook = persona_create(user=user, name="Rook", description="A thief.", is_default=True)
    assert persona_default(user=user) == rook and not Persona.objects.get(pk=ash.pk).is_default
    persona_update(persona=ash, data={"is_default": True})
    assert persona_default(user=user) == ash and not Persona.objects.get(pk=rook.pk).is_default
    persona_update(persona=ash, data={"is_default": False})
    assert persona_default(user=user) is None


def test_each_account_has_its_own_default(user, other_user):
    mine = persona_create(user=user, name="Ash", is_default=True)
    theirs = persona_create(user=other_user, name="Bo", is_default=True)
    assert persona_default(user=user) == mine and persona_default(user=other_user) == theirs


def test_the_database_holds_at_most_one_default_per_account(user):
    Persona.objects.create(user=user, name="A", is_default=True)
    with pytest.raises(IntegrityError):
        Persona.objects.create(user=user, name="B", is_default=True)


@pytest.mark.parametrize("name", ["", "   ", "x" * 101])
def test_a_persona_needs_a_short_name(user, name):
    with pytest.raises(ApplicationError) as caught:
        persona_create(user=user, name=name)
    assert caught.value.extra["field"] == "name" and not Persona.objects.exists()


def test_deleting_a_persona_keeps_its_chats_and_their_user_name(user, character):
    ash = persona_create(user=user, name="Ash")
    chat = chat_start(user=user, characters=[character], persona=ash)
    persona_delete(persona=ash)
    chat = fresh(chat)
    assert chat.persona is None and chat.user_name == "Ash"


# ----------------------------------------------------------------------------------------------------------- API


def test_persona_api_crud(api):
    response = api.post("/api/v1/personas/", {"name": "Ash", "description": "A wanderer.", "is_default": True})
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Ash" and body["is_default"] is True
    url = f"/api/v1/personas/{body['id']}"
    assert api.get(url).json()["description"] == "A wanderer."
    assert api.get("/api/v1/personas/").json()["results"][0]["id"] == body["id"]
    assert api.patch(url, {"name": "Ash Grey"}, format="json").json()["name"] == "Ash Grey"
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404


@pytest.mark.parametrize(("body", "field"), [({"name": ""}, "name"), ({"name": "x" * 101}, "name"), ({}, "name")])
def test_persona_api_names_the_bad_field_and_stores_nothing(api, body, field):
    response = api.post("/api/v1/personas/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Persona.objects.exists()


def test_a_bad_patch_names_the_field_and_changes_nothing(api, user):
    ash = persona_create(user=user, name="Ash")
    response = api.patch(f"/api/v1/personas/{ash.pk}", {"name": "  "}, format="json")
    assert response.status_code == 400 and "name" in response.content.decode()
    assert Persona.objects.get(pk=ash.pk).name == "Ash"


def test_another_users_persona_is_a_404_and_stays_as_it_is(other_api, user):
    ash = persona_create(user=user, name="Ash", description="Private.")
    url = f"/api/v1/personas/{ash.pk}"
    assert other_api.get(url).status_code == 404
    assert other_api.patch(url, {"name": "Stolen"}, format="json").status_code == 404
    assert other_api.delete(url).status_code == 404
    assert other_api.get("/api/v1/personas/").json()["results"] == []
    assert Persona.objects.get(pk=ash.pk).name == "Ash"


def test_a_chats_persona_is_changed_through_the_chat_api(api, user, mira_chat):
    ash = persona_create(user=user, name="Ash")
    url = f"/api/v1/chats/{mira_chat.pk}/"
    response = api.patch(url, {"persona": ash.pk}, format="json", **if_match(mira_chat))
    assert response.status_code == 200 and response.json()["persona"] == ash.pk
    assert fresh(mira_chat).persona == ash
    response = api.patch(url, {"persona": None}, format="json", **if_match(response.json()["integrity"]))
    assert response.status_code == 200 and response.json()["persona"] is None


def test_a_chat_cannot_take_another_users_persona(api, other_user, mira_chat):
    theirs = persona_create(user=other_user, name="Bo")
    response = api.patch(
        f"/api/v1/chats/{mira_chat.pk}/", {"persona": theirs.pk}, format="json", **if_match(mira_chat)
    )
    assert response.status_code == 400 and response.json()["extra"]["field"] == "persona"
    chat = fresh(mira_chat)
    assert chat.persona is None and chat.integrity == mira_chat.integrity


# --------------------------------------------------------------------------------------------------------- pages


def test_personas_page_creates_edits_makes_default_and_deletes(web, user):
    assert web.post("/personas/", {"name": "Ash", "description": "A wanderer."}).status_code == 302
    ash = Persona.objects.get(user=user, name="Ash")
    page = web.get("/personas/").content.decode()
    assert "Ash" in page and "Make default" in page
    web.post(f"/personas/{ash.pk}/default/")
    assert persona_default(user=user) == ash
    web.post(f"/personas/{ash.pk}/", {"name": "Ash Grey", "description": "", "is_default": "on"})
    assert Persona.objects.get(pk=ash.pk).name == "Ash Grey"
    bad = web.post(f"/personas/{ash.pk}/", {"name": ""})
    assert bad.status_code == 400 and Persona.objects.get(pk=ash.pk).name == "Ash Grey"
    web.post(f"/personas/{ash.pk}/delete/")
    assert not Persona.objects.filter(pk=ash.pk).exists()


def test_personas_pages_of_another_user_are_404(web, other_user):
    # A name no page token can hold (a space): "Bo" alone turned up inside a random CSRF token now and then.
    theirs = persona_create(user=other_user, name="Bo Hawthorne")
    assert web.get(f"/personas/{theirs.pk}/").status_code == 404
    assert web.post(f"/personas/{theirs.pk}/delete/").status_code == 404
    assert web.post(f"/personas/{theirs.pk}/default/").status_code == 404
    assert "Bo Hawthorne" not in web.get("/personas/").content.decode()
    assert Persona.objects.filter(pk=theirs.pk, is_default=False).exists()


def test_the_characters_page_links_the_personas_page(web):
    assert 'href="/personas/"' in web.get("/characters/").content.decode()


def test_a_chats_persona_is_changed_on_the_chat(web, user, mira_chat):
    ash = persona_create(user=user, name="Ash")
    fragment = web.get(f"/chats/{mira_chat.pk}/persona/").content.decode()
    assert "Ash" in fragment and "<html" not in fragment
    response = web.post(f"/chats/{mira_chat.pk}/persona/", {"persona": ash.pk}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Saved" in response.content.decode()
    assert Chat.objects.get(pk=mira_chat.pk).persona == ash
    assert web.post(f"/chats/{mira_chat.pk}/persona/", {"persona": ""}).status_code == 302
    assert Chat.objects.get(pk=mira_chat.pk).persona is None


def test_the_personas_page_says_which_lorebook_each_links(web, user):
    """A persona's Lorebook field takes any name (SillyTavern's persona may link a book not imported yet): the list
    says which it links, so a name mistyped shows."""
    persona_create(user=user, name="Wren", description="", lorebook="No Such Book")
    persona_create(user=user, name="Ash", description="")
    page = web.get("/personas/").content.decode()
    assert page.count('class="meta persona-lorebook"') == 1 and "Lorebook: “No Such Book”" in page
