"""A PATCH names a field it does not take, with a 400, and changes nothing: a misspelt `importanse` was answered
200 with nothing changed, and the person believed it saved. A field the answer holds (an `id` sent back with the
object read) is taken as it is, and refused when it would change (`status`, which a PATCH does not change)."""

import pytest

from apps.chats.models import Character, Chat, Persona
from apps.chats.services.personas import persona_create
from apps.extraction.models import ExtractionSettings
from apps.llm.models import Connection
from apps.memories.models import Entity, Memory
from apps.memories.services.memories import memory_create

pytestmark = pytest.mark.django_db


def _objects(user, character, mira_chat, llm):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    entity = Entity.objects.create(user=user, name="Lantern", type="item")
    persona = persona_create(user=user, name="Rowan", description="A sailor.")
    return [
        (f"/api/v1/memories/{memory.pk}/", Memory, memory.pk, "importanse", {}),
        (f"/api/v1/entities/{entity.pk}/", Entity, entity.pk, "nmae", {}),
        (f"/api/v1/personas/{persona.pk}", Persona, persona.pk, "descripton", {}),
        (f"/api/v1/characters/{character.pk}/", Character, character.pk, "personallity", {}),
        (f"/api/v1/chats/{mira_chat.pk}/", Chat, mira_chat.pk, "titel", {"HTTP_IF_MATCH": f'"{mira_chat.integrity}"'}),
        (f"/api/v1/llm/connections/{llm.pk}/", Connection, llm.pk, "modle", {}),
        ("/api/v1/extraction/settings", ExtractionSettings, None, "batch_evry", {"put": True}),
    ]


def _row(model, pk, user):
    rows = model.objects.filter(pk=pk) if pk is not None else model.objects.filter(user=user)
    return list(rows.values())


def test_a_patch_names_a_field_it_does_not_take_and_changes_nothing(api, user, character, mira_chat, llm):
    api.get("/api/v1/extraction/settings")  # the person's settings, as the page shows them
    for url, model, pk, misspelt, headers in _objects(user, character, mira_chat, llm):
        before = _row(model, pk, user)
        send = api.put if headers.pop("put", False) else api.patch  # the settings are PUT, in part as a PATCH
        response = send(url, {misspelt: "x"}, format="json", **headers)
        assert response.status_code == 400, (url, response.content)
        assert misspelt in response.json() and "Not a field this changes" in response.json()[misspelt][0], url
        assert _row(model, pk, user) == before, url


def test_a_field_only_answered_is_refused_when_it_would_change(api, user, character):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    response = api.patch(f"/api/v1/memories/{memory.pk}/", {"status": "retired"}, format="json")
    assert response.status_code == 400 and "status" in response.json()
    assert Memory.objects.get(pk=memory.pk).status == "active"


def test_a_field_the_answer_holds_may_be_sent_back(api, user, character):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    url = f"/api/v1/memories/{memory.pk}/"
    sent_back = api.get(url).json() | {"importance": 3}  # the whole answer, one field changed
    response = api.patch(url, sent_back, format="json")
    assert response.status_code == 200, response.content
    assert Memory.objects.get(pk=memory.pk).importance == 3
