"""A character's or a chat's memories as a World Info file (docs/LOREBOOKS.md, "Memories as a lorebook"): the entries,
their keys from entity names and aliases, where each goes, what is left out, the API's and the page's answers, and
that the file is a World Info file Lorekeeper itself imports and activates."""

from __future__ import annotations

import io
import json

import pytest

from apps.chats.services.chats import chat_create
from apps.lorebooks.services.books import lorebook_import
from apps.lorebooks.services.buffer import Settings
from apps.lorebooks.services.from_memories import memories_world
from apps.lorebooks.services.scan import Book, Scanned, scan
from apps.memories.services.memories import memory_create, memory_retire
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def mira(user):
    mira = CharacterFactory(user=user, name="Mira")
    hale = {"name": "Hale", "type": "person", "aliases": ["the captain", "HALE"]}
    memory_create(user=user, character=mira, kind="fact", content="Hale owns the Gull.", importance=3,
                  entities=[{"name": "Mira"}, hale, {"name": "Gull", "type": "ship"}])  # fmt: skip
    memory_create(user=user, character=mira, kind="scene", content="The storm night on the quay.",
                  entities=[{"name": "Mira"}])  # fmt: skip
    memory_create(user=user, character=mira, kind="arc", content="Mira learns to trust strangers.", importance=1)
    retired = memory_create(user=user, character=mira, kind="fact", content="Hale is dead.", entities=[hale])
    memory_retire(memory=retired)
    memory_create(user=user, character=mira, kind="daily", content="A quiet day.")
    return mira


def _by_content(world: dict) -> dict:
    return {entry["content"]: entry for entry in world["entries"].values()}


def test_each_active_memory_is_an_entry_keyed_by_its_entities(user, mira):
    name, world = memories_world(user=user, character_id=mira.pk)
    assert name == "Mira memories"
    entries = _by_content(world)
    assert set(entries) == {"Hale owns the Gull.", "The storm night on the quay.", "Mira learns to trust strangers."}
    fact = entries["Hale owns the Gull."]
    # the character's own name is left out when there are others; aliases once whatever their case
    assert fact["key"] == ["Hale", "the captain", "Gull"]
    assert (fact["position"], fact["order"], fact["vectorized"], fact["constant"]) == (0, 300, False, False)
    assert fact["comment"] == "Fact: Hale owns the Gull."
    scene = entries["The storm night on the quay."]
    assert scene["key"] == ["Mira"] and scene["position"] == 1  # only its own name: kept
    arc = entries["Mira learns to trust strangers."]
    assert arc["key"] == [] and arc["vectorized"] is True and arc["order"] == 100
    assert [entry["uid"] for entry in world["entries"].values()] == [0, 1, 2]  # most important first


def test_the_file_is_a_book_lorekeeper_imports_and_activates(user, mira):
    _, world = memories_world(user=user, character_id=mira.pk)
    book = lorebook_import(user=user, name="Mira memories", data=json.loads(json.dumps(world)))
    assert book.entries.count() == 3
    entries = [entry.data for entry in book.entries.all()]
    scanned = Scanned(messages=["Rowan: Did the captain come back?"], settings=Settings(), max_context=100_000,
                      count_tokens=len)  # fmt: skip
    fired = scan([Book(name="Mira memories", kind="global", entries=entries)], scanned)
    assert [entry["content"] for entry in fired.entries] == ["Hale owns the Gull."]


def test_a_chat_exports_its_own_and_its_characters_memories(user, mira):
    chat = chat_create(user=user, title="Harbour night", character_ids=[mira.pk])
    memory_create(user=user, chat=chat, character=mira, kind="event", content="Rowan arrived by boat.",
                  entities=[{"name": "Rowan"}])  # fmt: skip
    other = CharacterFactory(user=user, name="Tobin")
    memory_create(user=user, character=other, kind="fact", content="Tobin's own secret.")
    name, world = memories_world(user=user, chat_id=chat.pk)
    assert name == "Harbour night memories"
    assert "Rowan arrived by boat." in _by_content(world)
    assert "Hale owns the Gull." in _by_content(world)
    assert "Tobin's own secret." not in _by_content(world)


def test_the_api_answers_the_file_and_refuses_what_it_cannot_export(api, other_api, mira):
    response = api.get(f"/api/v1/lorebooks/from-memories?character_id={mira.pk}")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="Mira memories.json"'
    assert len(response.json()["entries"]) == 3
    for query in ("", f"character_id={mira.pk}&chat_id=1", "character_id=x"):
        refused = api.get(f"/api/v1/lorebooks/from-memories?{query}")
        assert refused.status_code == 400 and "character_id" in json.dumps(refused.json()), query
    assert other_api.get(f"/api/v1/lorebooks/from-memories?character_id={mira.pk}").status_code == 404


def test_the_memories_page_links_the_export_and_it_downloads(web, client, other_user, mira):
    page = web.get(f"/characters/{mira.pk}/memories/").content.decode()
    assert f'href="/lorebooks/from-memories/?character={mira.pk}" download' in page
    response = web.get(f"/lorebooks/from-memories/?character={mira.pk}")
    assert response.status_code == 200 and len(json.load(io.BytesIO(response.content))["entries"]) == 3
    assert web.get("/lorebooks/from-memories/?character=abc").status_code == 404
    client.force_login(other_user)
    assert client.get(f"/lorebooks/from-memories/?character={mira.pk}").status_code == 404
