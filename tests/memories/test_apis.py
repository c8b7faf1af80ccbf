"""The memories, entities and embedding-settings API: wiring, status codes, shapes and tenancy."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.chats.services.chats import chat_create, chat_import
from apps.memories.apis.search import HIT_FIELDS, SearchOutputSerializer, search_answer
from apps.memories.models import Entity, Memory
from apps.memories.search import memory_search
from apps.memories.services.memories import memory_create
from tests.chats.factories import CharacterFactory
from tests.memories.helpers import hits_read, jsonl, message_memories

pytestmark = pytest.mark.django_db

MEMORIES = "/api/v1/memories/"


def _error_field(response) -> str:
    """The field a 400 names: DRF's `{field: [...]}` or ApplicationError's `{"extra": {"field": ...}}`."""
    body = response.json()
    if "extra" in body:
        return body["extra"]["field"]
    [field] = body
    return field


# ----------------------------------------------------------------------------------------------------- create


def test_create_classifies_the_candidate_and_stores_it_with_its_vector(
    api, user, character, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            MEMORIES,
            {
                "character": character.pk,
                "kind": "fact",
                "content": "  Corvin keeps the matches in his boot.  ",
                "importance": 3,
                "valid_from": 2,
                "valid_to": 5,
                "entities": [{"name": "Corvin", "type": "person", "aliases": ["the old keeper"]}],
            },
            format="json",
            HTTP_X_LOREKEEPER_INSTANCE="desktop",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["content"] == "Corvin keeps the matches in his boot."
    assert (body["kind"], body["character"], body["chat"], body["status"], body["version"]) == (
        "fact",
        character.pk,
        None,
        "active",
        1,
    )
    assert (body["importance"], body["valid_from"], body["valid_to"]) == (3, 2, 5)
    assert body["source_instance"] == "desktop" and body["participating_instances"] == ["desktop"]
    [entity] = body["entities"]
    assert (entity["name"], entity["type"]) == ("Corvin", "person")
    assert Entity.objects.get(pk=entity["id"]).aliases == ["the old keeper"]
    # Classification compared it by vector, so it was stored with that vector: one embedding call, no second one.
    assert body["embedding_model"] == "openai:scripted"
    assert (body["decision"]["outcome"], body["decision"]["method"]) == ("passed", "embedding")
    assert scripted.embedded_texts() == ["Corvin keeps the matches in his boot."]


def test_a_chat_memory_may_name_a_character_of_that_chat(api, character, mira_chat):
    response = api.post(
        MEMORIES,
        {"chat": mira_chat.pk, "character": character.pk, "kind": "summary", "content": "They met."},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert (response.json()["chat"], response.json()["source_chat"]) == (mira_chat.pk, mira_chat.pk)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "fact"}, "content"),
        ({"kind": "fact", "content": "   "}, "content"),
        ({"kind": "gossip", "content": "x"}, "kind"),
        ({"kind": "message", "content": "x"}, "kind"),
        ({"kind": "summary", "content": "x"}, "chat"),
        ({"kind": "scene_recap", "content": "x"}, "chat"),
        ({"kind": "fact", "content": "x", "valid_from": -1}, "valid_from"),
        ({"kind": "fact", "content": "x", "valid_from": 5, "valid_to": 2}, "valid_to"),
        ({"kind": "fact", "content": "x", "valid_to": "soon"}, "valid_to"),
        ({"kind": "fact", "content": "x", "importance": 4}, "importance"),
        ({"kind": "fact", "content": "x", "entities": [{"type": "person"}]}, "entities"),
        ({"kind": "fact", "content": "x", "occurred_at": "0001-01-01T05:00:00Z"}, "occurred_at"),
        ({"kind": "fact", "content": "x", "occurred_at": "9999-12-31T10:00:00Z"}, "occurred_at"),
        ({"kind": "fact", "content": "x", "occurred_at": "0001-06-01T00:00:00Z"}, "occurred_at"),
        ({"kind": "weekly", "content": "x", "data": {"period": "9999-W52"}}, "data"),
        ({"kind": "monthly", "content": "x", "data": {"period": "9999-12"}}, "data"),
        ({"kind": "weekly", "content": "x", "occurred_at": "9999-12-28T00:00:00Z"}, "occurred_at"),
        # Past what the database's integer column holds.
        ({"kind": "fact", "content": "x", "valid_from": 2**31}, "valid_from"),
        ({"kind": "fact", "content": "x", "source_message_indices": [2**31]}, "source_message_indices"),
    ],
)
def test_create_refuses_bad_input_naming_the_field(api, character, body, field):
    response = api.post(MEMORIES, {"character": character.pk, **body}, format="json")
    assert response.status_code == 400, response.content
    assert _error_field(response) == field
    assert not Memory.objects.exists()


def test_create_refuses_a_memory_without_scope_or_with_a_character_outside_the_chat(api, user, mira_chat):
    response = api.post(MEMORIES, {"kind": "fact", "content": "Floating."}, format="json")
    assert response.status_code == 400 and _error_field(response) == "character"
    outsider = CharacterFactory(user=user, name="Outsider")
    response = api.post(
        MEMORIES, {"chat": mira_chat.pk, "character": outsider.pk, "kind": "fact", "content": "x"}, format="json"
    )
    assert response.status_code == 400 and _error_field(response) == "character"


def test_create_with_another_users_character_or_chat_answers_404(api, other_user):
    theirs = CharacterFactory(user=other_user)
    their_chat = chat_create(user=other_user, title="Theirs", character_ids=[theirs.pk])
    for scope in ({"character": theirs.pk}, {"chat": their_chat.pk}):
        response = api.post(MEMORIES, {**scope, "kind": "fact", "content": "x"}, format="json")
        assert response.status_code == 404, scope
    assert not Memory.objects.exists()


# ------------------------------------------------------------------------------------------------------- list


def test_list_filters_by_character_chat_kind_status_and_entity(
    api, user, character, scripted, django_capture_on_commit_callbacks
):
    other_character = CharacterFactory(user=user, name="Other")
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(("Mira", "Hello there.")), character_ids=[character.pk])
    message = message_memories(chat)[0]
    fact = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    event = memory_create(
        user=user, character=character, kind="event", content="Mira left.", entities=[{"name": "Corvin"}]
    )
    summary = memory_create(user=user, chat=chat, kind="summary", content="A greeting.")
    elsewhere = memory_create(user=user, character=other_character, kind="fact", content="Other likes coffee.")
    retired = memory_create(user=user, character=character, kind="fact", content="Mira liked milk.")
    Memory.objects.filter(pk=retired.pk).update(status="retired")
    corvin = Entity.objects.get(name="Corvin")

    def listed(query: str = "") -> set[int]:
        response = api.get(f"{MEMORIES}?{query}")
        assert response.status_code == 200, response.content
        return {m["id"] for m in response.json()["results"]}

    everything = {message.pk, fact.pk, event.pk, summary.pk, elsewhere.pk, retired.pk}
    assert listed() == everything
    assert listed(f"character={character.pk}") == everything - {elsewhere.pk}
    assert listed(f"chat={chat.pk}") == {message.pk, summary.pk, fact.pk, event.pk, retired.pk}
    assert listed("kind=fact") == {fact.pk, elsewhere.pk, retired.pk}
    assert listed("kind=fact,event&kind=summary") == {fact.pk, event.pk, summary.pk, elsewhere.pk, retired.pk}
    assert listed("status=retired") == {retired.pk}
    assert listed(f"character={character.pk}&kind=fact&status=active") == {fact.pk}
    assert listed(f"entity={corvin.pk}") == {event.pk}
    for bad in ("kind=gossip", "status=gone", "chat=abc"):
        assert api.get(f"{MEMORIES}?{bad}").status_code == 400, bad


def test_count_counts_what_the_list_with_the_same_parameters_holds(
    api, other_api, user, character, mira_chat, scripted
):
    memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    memory_create(user=user, character=character, kind="fact", content="Mira fears the sea.")
    memory_create(user=user, chat=mira_chat, kind="event", content="Mira lit the lamp.")
    retired = memory_create(user=user, character=character, kind="fact", content="Mira liked milk.")
    Memory.objects.filter(pk=retired.pk).update(status="retired")

    counted = api.get(f"{MEMORIES}count?chat={mira_chat.pk}&status=active").json()
    assert counted == {"count": 3, "by_kind": {"fact": 2, "event": 1}}
    listed = api.get(f"{MEMORIES}?chat={mira_chat.pk}&status=active").json()["results"]
    assert len(listed) == counted["count"]
    assert api.get(f"{MEMORIES}count?kind=fact").json()["count"] == 3
    assert api.get(f"{MEMORIES}count?status=gone").status_code == 400
    assert other_api.get(f"{MEMORIES}count?chat={mira_chat.pk}").status_code == 404
    assert other_api.get(f"{MEMORIES}count").json() == {"count": 0, "by_kind": {}}


def test_list_pages_with_a_cursor_newest_first(api, user, character):
    made = [memory_create(user=user, character=character, kind="fact", content=f"Fact {i}.").pk for i in range(5)]
    seen, url = [], f"{MEMORIES}?limit=2"
    while url:
        body = api.get(url).json()
        assert len(body["results"]) <= 2
        seen += [m["id"] for m in body["results"]]
        url = body["next"]
    assert seen == sorted(made, reverse=True)


# ------------------------------------------------------------------------------------------------ read, edit


def test_patch_bumps_the_version_and_re_embeds_only_when_the_content_changes(
    api, user, character, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    url = f"{MEMORIES}{memory.pk}/"
    scripted.forget()

    with django_capture_on_commit_callbacks(execute=True):
        response = api.patch(url, {"content": "Mira likes coffee.", "importance": 3}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["content"], response.json()["importance"], response.json()["version"]) == (
        "Mira likes coffee.",
        3,
        2,
    )
    assert scripted.embedded_texts() == ["Mira likes coffee."]
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.embedding_model == "openai:scripted"
    assert [float(x) for x in stored.embedding] == pytest.approx(scripted.vector_for("Mira likes coffee.", "scripted"))

    scripted.forget()
    with django_capture_on_commit_callbacks(execute=True):
        response = api.patch(url, {"confidence": 0.9, "entities": [{"name": "Mira"}]}, format="json")
    assert response.json()["version"] == 3 and [e["name"] for e in response.json()["entities"]] == ["Mira"]
    assert scripted.requests == []
    assert Memory.objects.get(pk=memory.pk).embedding_model == "openai:scripted"

    unchanged = api.patch(url, {"content": "Mira likes coffee."}, format="json")
    assert unchanged.json()["version"] == 3
    assert api.get(url).json()["confidence"] == 0.9


def test_patch_refuses_bad_input_naming_the_field(
    api, user, character, mira_chat, scripted, django_capture_on_commit_callbacks
):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    url = f"{MEMORIES}{memory.pk}/"
    for body, field in (
        ({"kind": "message"}, "kind"),
        ({"content": ""}, "content"),
        ({"valid_from": 5, "valid_to": 1}, "valid_to"),
    ):
        response = api.patch(url, body, format="json")
        assert response.status_code == 400 and _error_field(response) == field, body
    with django_capture_on_commit_callbacks(execute=True):
        chat_import(user=user, stream=jsonl(("Mira", "Hi.")), character_ids=[character.pk])
    message = Memory.objects.get(kind="message")
    assert api.patch(f"{MEMORIES}{message.pk}/", {"importance": 3}, format="json").status_code == 400
    assert api.delete(f"{MEMORIES}{message.pk}/").status_code == 400


def test_patch_cannot_turn_a_character_memory_into_a_chat_only_kind(api, user, character):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    response = api.patch(f"{MEMORIES}{memory.pk}/", {"kind": "summary"}, format="json")
    # Create refuses a summary without a chat; an edit must not make one (the kind is the field at fault here).
    assert response.status_code == 400 and _error_field(response) == "kind"
    assert Memory.objects.get(pk=memory.pk).kind == "fact"


def test_patch_cannot_move_valid_to_before_the_stored_valid_from(api, user, character):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira is awake.", valid_from=5)
    response = api.patch(f"{MEMORIES}{memory.pk}/", {"valid_to": 1}, format="json")
    # Create refuses valid_to < valid_from; a partial edit must check against the stored bound.
    assert response.status_code == 400 and _error_field(response) == "valid_to"
    assert Memory.objects.get(pk=memory.pk).valid_to is None


def test_delete_retires_the_memory_which_stays_readable_but_leaves_search(api, user, character, scripted):
    memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    url = f"{MEMORIES}{memory.pk}/"
    search = {"query": "tea"}
    assert [r["id"] for r in api.post(f"{MEMORIES}search", search, format="json").json()["results"]] == [memory.pk]

    response = api.delete(url)
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["retired_reason"], response.json()["version"]) == (
        "retired",
        "deleted",
        2,
    )
    assert api.get(url).json()["status"] == "retired"
    assert api.post(f"{MEMORIES}search", search, format="json").json()["results"] == []
    found = api.post(f"{MEMORIES}search", {**search, "include_retired": True}, format="json").json()["results"]
    assert [(r["id"], r["status"]) for r in found] == [(memory.pk, "retired")]
    # A retried DELETE answers the same and changes nothing.
    assert api.delete(url).json()["version"] == 2


def test_history_answers_the_supersession_chain_oldest_first(api, user, character):
    first, second, third = (
        memory_create(user=user, character=character, kind="fact", content=f"Mira is {age}.")
        for age in ("twenty", "twenty-one", "twenty-two")
    )
    Memory.objects.filter(pk=first.pk).update(superseded_by=second, status="retired")
    Memory.objects.filter(pk=second.pk).update(superseded_by=third, status="retired")

    for memory in (first, second, third):
        response = api.get(f"{MEMORIES}{memory.pk}/history")
        assert response.status_code == 200, response.content
        assert [m["id"] for m in response.json()["results"]] == [first.pk, second.pk, third.pk]
    detail = api.get(f"{MEMORIES}{second.pk}/").json()
    assert (detail["supersedes"], detail["superseded_by"]) == ([first.pk], third.pk)


# ----------------------------------------------------------------------------------------------------- search


def test_search_answers_method_results_and_signals(api, user, character, scripted):
    memory = memory_create(
        user=user,
        character=character,
        kind="event",
        content="Corvin relit the lantern.",
        source_message_indices=[4, 2],
    )
    response = api.post(
        f"{MEMORIES}search",
        {"query": "Who relit the lantern?", "character": character.pk, "kinds": ["event"], "limit": 5},
        format="json",
        HTTP_X_LOREKEEPER_INSTANCE="phone",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    # The query was embedded but the memory has no vector yet: only its words found it.
    assert body["method"] == "hybrid"
    [hit] = body["results"]
    assert hit["id"] == memory.pk and hit["kind"] == "event" and hit["content"] == "Corvin relit the lantern."
    assert (hit["character"], hit["chat"], hit["source_message_indices"], hit["status"]) == (
        character.pk,
        None,
        [2, 4],
        "active",
    )
    assert set(hit["signals"]) == {"vector", "text", "recency", "graph", "instance", "speaker", "time"}
    assert hit["signals"]["vector"] is None and hit["signals"]["text"] > 0
    assert 0 < hit["score"] and 0 < hit["relevance"] <= 1
    assert set(body["timings_ms"]) == {"embed", "search"}


def test_search_answers_what_its_documented_serializer_would(
    api, user, character, scripted, django_capture_on_commit_callbacks
):
    """The answer is made directly, not by SearchOutputSerializer (the schema's): the two agree, memory by memory."""
    memory_create(
        user=user, character=character, kind="event", content="Corvin relit the lantern.", source_message_indices=[4],
        occurred_at=datetime(2024, 6, 1, 21, 15, 30, 250000, tzinfo=UTC), confidence=0.85,
    )  # fmt: skip
    memory_create(user=user, character=character, kind="fact", content="The lantern hangs over the door.")
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(("Corvin", "I relit the lantern at dusk.")))
    assert message_memories(chat)
    response = api.post(f"{MEMORIES}search", {"query": "Who relit the lantern?", "limit": 10}, format="json")
    body = response.json()
    assert response.status_code == 200 and len(body["results"]) >= 3, body
    assert {hit["occurred_at"] for hit in body["results"]} >= {None, "2024-06-01T21:15:30.250000Z"}

    outcome = memory_search(user=user, query="Who relit the lantern?", fields=HIT_FIELDS)
    assert search_answer(outcome) == json.loads(json.dumps(SearchOutputSerializer(outcome).data))


def test_search_reads_of_its_hits_only_what_it_answers(api, user, character, scripted):
    memory_create(user=user, character=character, kind="event", content="Corvin relit the lantern.")
    with CaptureQueriesContext(connection) as queries:
        response = api.post(f"{MEMORIES}search", {"query": "Who relit the lantern?"}, format="json")
    assert response.status_code == 200 and len(response.json()["results"]) == 1, response.content
    [hits] = hits_read(queries)
    read = set(hits.split(" FROM ")[0].removeprefix("SELECT ").split(", "))
    assert {"content", "occurred_at", "source_message_indices"} <= read
    for unread in ("data", "content_hash", "embedding", "embedding_model", "retired_reason"):
        assert unread not in read, unread


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": ""},
        {"query": "x", "limit": 0},
        {"query": "x", "kinds": ["gossip"]},
        {"query": "x", "min_score": -1},
    ],
)
def test_search_refuses_bad_input(api, body):
    assert api.post(f"{MEMORIES}search", body, format="json").status_code == 400


# ---------------------------------------------------------------------------------------------------- tenancy


def test_a_search_scoped_to_a_chat_without_characters_is_404_for_another_user_and_answers_its_owner(
    api, user, other_user, scripted
):
    mine = chat_create(user=user, title="No one yet", character_ids=[])
    theirs = chat_create(user=other_user, title="Theirs, no one yet", character_ids=[])
    assert api.post(f"{MEMORIES}search", {"query": "lantern", "chat": theirs.pk}, format="json").status_code == 404
    response = api.post(f"{MEMORIES}search", {"query": "lantern", "chat": mine.pk}, format="json")
    assert response.status_code == 200 and response.json()["results"] == []
    assert api.post(f"{MEMORIES}search", {"query": "lantern", "chat": 10**9}, format="json").status_code == 404


def test_another_users_memories_entities_chats_and_characters_answer_404(api, other_user, scripted):
    theirs = CharacterFactory(user=other_user)
    their_chat = chat_create(user=other_user, title="Theirs", character_ids=[theirs.pk])
    memory = memory_create(
        user=other_user, character=theirs, kind="fact", content="A secret.", entities=[{"name": "Corvin"}]
    )
    entity = Entity.objects.get(user=other_user)

    assert api.get(f"{MEMORIES}{memory.pk}/").status_code == 404
    assert api.patch(f"{MEMORIES}{memory.pk}/", {"content": "Mine now."}, format="json").status_code == 404
    assert api.delete(f"{MEMORIES}{memory.pk}/").status_code == 404
    assert api.get(f"{MEMORIES}{memory.pk}/history").status_code == 404
    assert api.get(f"/api/v1/entities/{entity.pk}/").status_code == 404
    assert api.patch(f"/api/v1/entities/{entity.pk}/", {"name": "Mine"}, format="json").status_code == 404
    assert api.get(f"{MEMORIES}?chat={their_chat.pk}").status_code == 404
    assert api.get(f"{MEMORIES}?character={theirs.pk}").status_code == 404
    assert api.get(f"/api/v1/entities/?character={theirs.pk}").status_code == 404
    for scope in ({"chat": their_chat.pk}, {"character": theirs.pk}):
        assert api.post(f"{MEMORIES}search", {"query": "secret", **scope}, format="json").status_code == 404
    # And nothing of theirs shows in the lists or a search without scope.
    assert api.get(MEMORIES).json()["results"] == []
    assert api.get(f"{MEMORIES}?entity={entity.pk}").json()["results"] == []
    assert api.get("/api/v1/entities/").json()["results"] == []
    assert api.post(f"{MEMORIES}search", {"query": "secret"}, format="json").json()["results"] == []
    memory.refresh_from_db()
    assert (memory.content, memory.status, memory.version) == ("A secret.", "active", 1)
    assert Entity.objects.get(pk=entity.pk).name == "Corvin"


def test_anonymous_requests_are_refused(client):
    assert client.get(MEMORIES).status_code in (401, 403)
    assert client.post(f"{MEMORIES}search", {"query": "x"}, content_type="application/json").status_code in (401, 403)


# ---------------------------------------------------------------------------------------------------- entities


def test_entities_list_detail_and_patch(api, user, character):
    linked = memory_create(
        user=user,
        character=character,
        kind="fact",
        content="Corvin keeps the matches.",
        entities=[{"name": "Corvin", "type": "person", "aliases": ["the old keeper"]}],
    )
    retired = memory_create(
        user=user, character=character, kind="fact", content="Corvin was young.", entities=[{"name": "corvin"}]
    )
    Memory.objects.filter(pk=retired.pk).update(status="retired")
    memory_create(user=user, character=character, kind="fact", content="A gull.", entities=[{"name": "Gull"}])
    corvin = Entity.objects.get(name="Corvin")

    listed = api.get("/api/v1/entities/").json()["results"]
    assert {e["name"]: e["memory_count"] for e in listed} == {"Corvin": 1, "Gull": 1}
    assert [e["name"] for e in api.get("/api/v1/entities/?search=the old keeper").json()["results"]] == ["Corvin"]
    assert [e["name"] for e in api.get("/api/v1/entities/?search=corv").json()["results"]] == ["Corvin"]
    assert len(api.get(f"/api/v1/entities/?character={character.pk}").json()["results"]) == 2

    detail = api.get(f"/api/v1/entities/{corvin.pk}/").json()
    assert (detail["name"], detail["type"], detail["aliases"], detail["character"]) == (
        "Corvin",
        "person",
        ["the old keeper"],
        character.pk,
    )
    assert [m["id"] for m in detail["memories"]] == [linked.pk]

    response = api.patch(f"/api/v1/entities/{corvin.pk}/", {"name": "Corvin Hale", "aliases": ["Hale"]}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["name"], response.json()["aliases"]) == ("Corvin Hale", ["Hale"])
    clash = api.patch(f"/api/v1/entities/{corvin.pk}/", {"name": "gull"}, format="json")
    assert clash.status_code == 400 and _error_field(clash) == "name"


# ------------------------------------------------------------------------------------------ embedding settings


def test_embedding_settings_read_and_write_without_ever_showing_the_key(
    api, user, character, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(user=user, character=character, kind="fact", content="Mira likes tea.")
    url = "/api/v1/embeddings/settings"
    assert api.get(url).json() == {
        "provider": "deployment",
        "model": "scripted",
        "base_url": "",
        "dimensions": None,
        "model_key": "openai:scripted",
        "has_api_key": False,
    }

    with django_capture_on_commit_callbacks(execute=True):
        response = api.put(
            url,
            {"provider": "openai", "model": "second", "base_url": f"{scripted.url}/v1", "api_key": "sk-sekrit"},
            format="json",
        )
    assert response.status_code == 200, response.content
    assert "api_key" not in response.json() and "sk-sekrit" not in response.content.decode()
    assert (response.json()["model_key"], response.json()["has_api_key"]) == ("openai:second", True)
    assert "sk-sekrit" not in api.get(url).content.decode()
    # Changing the model re-embedded the user's memories with the new one (and the key went to the provider).
    assert Memory.objects.get(pk=memory.pk).embedding_model == "openai:second"
    assert scripted.requests[-1].authorization == "Bearer sk-sekrit"

    assert api.put(url, {"provider": "local", "base_url": "http://x.test"}, format="json").status_code == 400
    assert api.put(url, {"provider": "cohere"}, format="json").status_code == 400
    assert api.put(url, {"provider": "deployment"}, format="json").json()["model_key"] == "openai:scripted"


@pytest.mark.parametrize("occurred_at", ["0002-01-01T00:00:00Z", "9998-12-31T23:00:00Z"])
def test_a_memory_at_the_first_or_last_year_kept_is_found_by_a_query_naming_a_month(api, character, occurred_at):
    # A month the query names is matched with days of slack around each memory's moment.
    body = {"character": character.pk, "kind": "fact", "content": "The ledger burned.", "occurred_at": occurred_at}
    assert api.post(MEMORIES, body, format="json").status_code == 201
    response = api.post("/api/v1/memories/search", {"query": "What burned in June or January?"}, format="json")
    assert response.status_code == 200, response.content
