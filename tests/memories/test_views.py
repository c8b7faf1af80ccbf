"""The memory browser: pages and their htmx fragments, filters, search, edits, entities, embedding settings and the
recall-index progress on the chat page. Tenancy: another user's objects are 404s."""

import re

import pytest

from apps.chats.services.characters import character_create
from apps.chats.services.chats import chat_create
from apps.memories.models import EmbeddingSettings, Entity, Memory
from apps.memories.services.entities import entities_ensure
from apps.memories.services.indexing import chat_index_messages
from apps.memories.services.memories import memory_create, memory_retire
from tests.chats.factories import add_messages

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def no_embeddings(settings):
    """No model to load: search answers by text unless a test asks for the scripted embedding server."""
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"


@pytest.fixture
def foreign(other_user):
    """Another user's character, chat, memory and entity."""
    character = character_create(user=other_user, name="Bob's hero")
    chat = chat_create(user=other_user, title="Bob's chat", character_ids=[character.pk])
    memory = memory_create(
        user=other_user, character=character, kind="fact", content="Bob's secret lantern.", entities=[{"name": "Zed"}]
    )
    return {"character": character, "chat": chat, "memory": memory, "entity": Entity.objects.get(user=other_user)}


def _fact(user, character, content="Mira keeps the lantern lit.", **fields):
    return memory_create(user=user, character=character, kind=fields.pop("kind", "fact"), content=content, **fields)


def _indexed_messages(mira_chat, count=4) -> None:
    add_messages(mira_chat, count)
    chat_index_messages(chat_id=mira_chat.pk)


def _body(response) -> str:
    """The page without its random CSRF tokens (a token may hold any short name a test looks for)."""
    return re.sub(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+', r"\1…", response.content.decode())


# ---------------------------------------------------------------------------------------------------- browser


def test_memory_pages_need_sign_in(client, user, character):
    memory = _fact(user, character)
    for url in ("/memories/", f"/memories/{memory.pk}/", "/memories/entities/", "/memories/settings/"):
        assert client.get(url)["Location"].startswith("/accounts/login/")


def test_character_browser_full_page_and_fragment(web, user, character, mira_chat):
    _fact(user, character, "Mira <b>keeps</b> the lantern.\nEvery night.", importance=3, confidence=0.9)
    memory_create(user=user, chat=mira_chat, kind="scene", content="The tower scene.", source_message_indices=[2, 3])
    page = web.get(f"/characters/{character.pk}/memories/")
    assert page.status_code == 200
    html = _body(page)
    assert "<html" in html and "Memories of Mira" in html
    # Autoescaped, line breaks kept.
    assert "Mira &lt;b&gt;keeps&lt;/b&gt; the lantern.<br>Every night." in html
    assert "importance 3 · confidence 0.90 · v1" in html
    # A memory of one of the character's chats, with its source messages linked to the chat.
    assert "The tower scene." in html and f'href="/chats/{mira_chat.pk}/?at=2">#2–#3</a>' in html
    fragment = _body(web.get(f"/characters/{character.pk}/memories/", **HX))
    assert "<html" not in fragment and 'id="memory-results"' in fragment and "The tower scene." in fragment


def test_chat_browser_hides_message_memories_unless_asked(web, user, character, mira_chat):
    _indexed_messages(mira_chat)
    memory_create(user=user, chat=mira_chat, kind="summary", content="So far: a lantern.")
    _fact(user, character, "Mira fears the dark.")
    other_chat = chat_create(user=user, title="Elsewhere", character_ids=[character.pk])
    memory_create(user=user, chat=other_chat, kind="summary", content="Another chat's summary.")

    html = _body(web.get(f"/chats/{mira_chat.pk}/memories/"))
    assert "So far: a lantern." in html and "Mira fears the dark." in html
    assert "Another chat&#x27;s summary." not in html
    assert "message 1" not in html and "2 memories (chat messages hidden)" in html

    shown = _body(web.get(f"/chats/{mira_chat.pk}/memories/?messages=on", **HX))
    assert "message 1" in shown and "6 memories" in shown
    assert f'<a href="/chats/{mira_chat.pk}/?at=1">message #1</a>' in shown
    only_messages = _body(web.get(f"/chats/{mira_chat.pk}/memories/?kind=message", **HX))
    assert "message 1" in only_messages and "So far" not in only_messages


def test_filters_by_kind_status_and_entity(web, user, character):
    _fact(user, character, "A fact about Corvin.", entities=[{"name": "Corvin", "type": "person"}])
    _fact(user, character, "An event.", kind="event")
    memory_retire(memory=_fact(user, character, "An old fact."), reason="wrong")
    corvin = Entity.objects.get(name="Corvin")
    url = f"/characters/{character.pk}/memories/"

    facts = _body(web.get(url, {"kind": "fact"}, **HX))
    assert "A fact about Corvin." in facts and "An event." not in facts and "An old fact." not in facts
    retired = _body(web.get(url, {"status": "retired"}, **HX))
    assert "An old fact." in retired and "retired: wrong" in retired and "An event." not in retired
    both = _body(web.get(url, {"status": "all"}, **HX))
    assert "An old fact." in both and "An event." in both
    assert f'<option value="{corvin.pk}">Corvin (Mira)</option>' in _body(web.get(url))
    linked = _body(web.get(url, {"entity": corvin.pk}, **HX))
    assert "A fact about Corvin." in linked and "An event." not in linked
    assert f'href="/memories/entities/{corvin.pk}/"' in linked


def test_bad_filters_answer_400_with_the_error_inline(web, user, character, foreign):
    url = f"/characters/{character.pk}/memories/"
    response = web.get(url, {"kind": "nonsense"}, **HX)
    assert response.status_code == 400 and "Kind:" in _body(response) and "<html" not in _body(response)
    # Another user's entity is not a choice here.
    response = web.get(url, {"entity": foreign["entity"].pk})
    assert response.status_code == 400 and "Entity:" in _body(response) and "<html" in _body(response)
    assert web.get(url, {"status": "gone"}, **HX).status_code == 400


def test_pagination_keeps_the_filters(web, user, character):
    for i in range(30):
        _fact(user, character, f"Fact number {i}.")
    _fact(user, character, "An event.", kind="event")
    first = _body(web.get(f"/characters/{character.pk}/memories/", {"kind": "fact"}, **HX))
    assert "Page 1 of 2" in first and "?kind=fact&amp;page=2" in first
    second = _body(web.get(f"/characters/{character.pk}/memories/", {"kind": "fact", "page": 2}, **HX))
    assert "Page 2 of 2" in second and "Fact number 0." in second and "An event." not in second


def test_all_memories_page_shows_every_scope_of_mine_only(web, user, character, mira_chat, foreign):
    _fact(user, character, "Mira's fact.")
    memory_create(user=user, chat=mira_chat, kind="scene", content="A scene of the chat.")
    html = _body(web.get("/memories/"))
    assert "All memories" in html and "Mira&#x27;s fact." in html and "A scene of the chat." in html
    assert "Bob&#x27;s secret" not in html


def test_browsers_of_another_users_character_or_chat_are_404(web, foreign):
    assert web.get(f"/characters/{foreign['character'].pk}/memories/").status_code == 404
    assert web.get(f"/chats/{foreign['chat'].pk}/memories/", **HX).status_code == 404
    assert web.get(f"/chats/{foreign['chat'].pk}/memories/progress/", **HX).status_code == 404


# ---------------------------------------------------------------------------------------------------- search


def test_search_fragment_shows_method_scores_and_signals(web, user, character, mira_chat, foreign):
    _fact(user, character, "The lantern went out at midnight.")
    _fact(user, character, "Mira likes tea.")
    response = web.get(f"/characters/{character.pk}/memories/", {"q": "lantern midnight"}, **HX)
    assert response.status_code == 200
    html = _body(response)
    assert "<html" not in html
    assert 'class="method method-text"' in html and ">text</span>" in html
    assert "1 result</strong>" in html and "The lantern went out at midnight." in html
    assert "Mira likes tea." not in html and "Bob&#x27;s secret" not in html
    scores = re.findall(r'<span class="score"[^>]*>([^<]+)</span>', html)
    assert len(scores) == 1 and re.fullmatch(r"\d\.\d\d", scores[0])
    for signal in ("relevance", "vector", "text", "recency", "graph", "instance"):
        assert re.search(rf"<dt( title=\"[^\"]+\")?>{signal}</dt>", html), signal
    assert "title=\"Full-text rank of the query's words: not on a 0 to 1 scale" in html
    assert "Chat messages are left out" in html


def test_search_full_page_and_message_recall(web, user, character, mira_chat):
    add_messages(mira_chat, 3)
    mira_chat.messages.filter(index=1).update(mes="The lantern is lit again.")
    chat_index_messages(chat_id=mira_chat.pk)
    page = web.get(f"/chats/{mira_chat.pk}/memories/", {"q": "lantern", "messages": "on"})
    html = _body(page)
    assert page.status_code == 200 and "<html" in html and 'value="lantern"' in html
    assert "You: The lantern is lit again." in html and 'class="method method-text"' in html


def test_search_uses_vectors_when_embeddings_run(web, user, character, scripted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        _fact(user, character, "The lantern went out at midnight.")
    assert Memory.objects.get().embedding_model == "openai:scripted"
    html = _body(web.get(f"/characters/{character.pk}/memories/", {"q": "lantern"}, **HX))
    assert 'class="method method-hybrid"' in html and "vector similarity and full-text ranking, fused" in html


def test_search_errors_are_shown_inline(web, user, character):
    response = web.get(f"/characters/{character.pk}/memories/", {"q": "x" * 2001}, **HX)
    assert response.status_code == 400
    html = _body(response)
    assert "<html" not in html and 'class="form-errors"' in html and "Search:" in html


def test_search_filters_by_status_and_entity(web, user, character):
    _fact(user, character, "Corvin relit the lantern.", entities=[{"name": "Corvin"}])
    _fact(user, character, "Someone else carried a lantern.")
    memory_retire(memory=_fact(user, character, "The lantern was blue."), reason="wrong")
    corvin = Entity.objects.get(name="Corvin")
    url = f"/characters/{character.pk}/memories/"
    active = _body(web.get(url, {"q": "lantern"}, **HX))
    assert "2 results" in active and "The lantern was blue." not in active
    retired = _body(web.get(url, {"q": "lantern", "status": "retired"}, **HX))
    assert "1 result<" in retired and "The lantern was blue." in retired
    linked = _body(web.get(url, {"q": "lantern", "entity": corvin.pk}, **HX))
    assert "1 result<" in linked and "Corvin relit the lantern." in linked


# ---------------------------------------------------------------------------------------------------- one memory


def test_detail_page_and_card_fragment(web, user, character, mira_chat):
    memory = memory_create(
        user=user,
        character=character,
        chat=mira_chat,
        kind="fact",
        content="Mira <script>alert(1)</script> fears the dark.",
        valid_from=3,
        source_message_indices=[3, 4],
        entities=[{"name": "Mira", "type": "person"}],
        data={"mood": "afraid"},
    )
    html = _body(web.get(f"/memories/{memory.pk}/"))
    assert "<html" in html and "&lt;script&gt;" in html and "<script>alert" not in html
    assert "from message #3" in html and f"/chats/{mira_chat.pk}/?at=3" in html and "not embedded yet" in html
    assert ">Mira</a>" in html and "&quot;mood&quot;: &quot;afraid&quot;" in html
    assert 'id="memory-history"' in html and "Retire" in html
    card = _body(web.get(f"/memories/{memory.pk}/", **HX))
    assert "<html" not in card and 'id="memory-card"' in card and 'id="memory-history"' not in card


def test_history_is_a_timeline_with_the_current_memory_highlighted(web, user, character):
    newer = _fact(user, character, "Mira is 30.")
    older = _fact(user, character, "Mira is 29.", superseded_by=newer)
    memory_retire(memory=older, reason="superseded")
    html = _body(web.get(f"/memories/{newer.pk}/"))
    timeline = html[html.index('class="timeline"') :]
    assert timeline.index("Mira is 29.") < timeline.index("Mira is 30.")
    current = rf'<li class="current">\s*<div class="row">\s*<span><strong>#{newer.pk} \(this one\)'
    assert re.search(current, timeline)
    assert f'href="/memories/{older.pk}/"' in timeline
    # The superseded one stays retired: no restore offered, and a forced restore is refused.
    old_page = _body(web.get(f"/memories/{older.pk}/"))
    assert "Replaced by" in old_page and f"/memories/{older.pk}/restore/" not in old_page
    response = web.post(f"/memories/{older.pk}/restore/", **HX)
    assert response.status_code == 400 and "stays retired" in _body(response)
    assert Memory.objects.get(pk=older.pk).status == "retired"


def test_edit_form_swaps_in_and_saves_through_htmx(web, user, character):
    memory = _fact(user, character)
    form = _body(web.get(f"/memories/{memory.pk}/edit/", **HX))
    assert "<html" not in form and 'id="memory-card"' in form and 'name="valid_to"' in form
    assert "Mira keeps the lantern lit." in form
    response = web.post(
        f"/memories/{memory.pk}/edit/",
        {
            "version": "1",
            "content": "Mira keeps two lanterns.",
            "kind": "event",
            "importance": "3",
            "confidence": "0.4",
            "time_scope": "session",
            "valid_from": "2",
            "valid_to": "5",
        },
        **HX,
    )
    assert response.status_code == 200
    html = _body(response)
    assert "Mira keeps two lanterns." in html and "version 2" in html and 'hx-swap-oob="true"' in html
    memory.refresh_from_db()
    assert (memory.content, memory.kind, memory.importance, memory.confidence) == (
        "Mira keeps two lanterns.",
        "event",
        3,
        0.4,
    )
    assert (memory.time_scope, memory.valid_from, memory.valid_to, memory.version) == ("session", 2, 5, 2)


def test_edit_without_htmx_redirects_and_full_form_page_works(web, user, character):
    memory = _fact(user, character)
    assert "<html" in _body(web.get(f"/memories/{memory.pk}/edit/"))
    data = {"version": "1", "content": "Changed.", "kind": "fact", "importance": "2", "confidence": "0.7"}
    response = web.post(f"/memories/{memory.pk}/edit/", data)
    assert response.status_code == 302 and response["Location"] == f"/memories/{memory.pk}/"
    assert Memory.objects.get(pk=memory.pk).content == "Changed."


def test_invalid_edit_shows_errors_next_to_fields_and_changes_nothing(web, user, character):
    memory = _fact(user, character)
    bad = {
        "content": "  ",
        "kind": "message",
        "importance": "7",
        "confidence": "2",
        "valid_from": "5",
        "valid_to": "1",
    }
    response = web.post(f"/memories/{memory.pk}/edit/", bad, **HX)
    assert response.status_code == 400
    html = _body(response)
    assert "<html" not in html and html.count('class="field-error"') >= 4
    assert "Must not be before" in html and "This field is required." in html
    full = web.post(f"/memories/{memory.pk}/edit/", bad)
    assert full.status_code == 400 and "<html" in _body(full)
    memory.refresh_from_db()
    assert memory.content == "Mira keeps the lantern lit." and memory.version == 1


def test_retire_and_restore_through_htmx_and_plain_posts(web, user, character):
    memory = _fact(user, character)
    response = web.post(f"/memories/{memory.pk}/retire/", {"reason": "not true"}, **HX)
    assert response.status_code == 200
    html = _body(response)
    assert "<html" not in html and "not true" in html and f"/memories/{memory.pk}/restore/" in html
    assert 'id="memory-history" hx-swap-oob="true"' in html
    memory.refresh_from_db()
    assert (memory.status, memory.retired_reason, memory.version) == ("retired", "not true", 2)
    response = web.post(f"/memories/{memory.pk}/restore/")
    assert response.status_code == 302 and response["Location"] == f"/memories/{memory.pk}/"
    memory.refresh_from_db()
    assert memory.status == "active" and memory.retired_reason == ""
    response = web.post(f"/memories/{memory.pk}/retire/")
    assert response.status_code == 302
    assert Memory.objects.get(pk=memory.pk).retired_reason == "retired by hand"
    assert web.get(f"/memories/{memory.pk}/retire/").status_code == 405


def test_message_memories_are_read_only(web, user, mira_chat):
    _indexed_messages(mira_chat, 2)
    memory = Memory.objects.get(chat=mira_chat, message_index=1)
    html = _body(web.get(f"/memories/{memory.pk}/"))
    assert "It follows its message" in html and f'href="/chats/{mira_chat.pk}/?at=1"' in html
    assert f"/memories/{memory.pk}/edit/" not in html and f"/memories/{memory.pk}/retire/" not in html
    edit = web.post(
        f"/memories/{memory.pk}/edit/",
        {"content": "Hacked.", "kind": "fact", "importance": "2", "confidence": "0.5"},
        **HX,
    )
    assert edit.status_code == 400 and "edit the message in the chat" in _body(edit)
    assert web.get(f"/memories/{memory.pk}/edit/").status_code == 400
    retire = web.post(f"/memories/{memory.pk}/retire/", **HX)
    assert retire.status_code == 400 and "leaves the index when its message is deleted" in _body(retire)
    memory.refresh_from_db()
    assert memory.content == "You: message 1" and memory.status == "active"


def test_another_users_memory_is_404_everywhere(web, foreign):
    pk = foreign["memory"].pk
    assert web.get(f"/memories/{pk}/").status_code == 404
    assert web.get(f"/memories/{pk}/", **HX).status_code == 404
    assert web.get(f"/memories/{pk}/edit/").status_code == 404
    data = {"content": "Mine now.", "kind": "fact", "importance": "2", "confidence": "0.5"}
    assert web.post(f"/memories/{pk}/edit/", data, **HX).status_code == 404
    assert web.post(f"/memories/{pk}/retire/", **HX).status_code == 404
    assert web.post(f"/memories/{pk}/restore/").status_code == 404
    memory = Memory.objects.get(pk=pk)
    assert memory.content == "Bob's secret lantern." and memory.status == "active"


def test_posts_need_the_csrf_token(user, character):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    memory = _fact(user, character)
    assert client.post(f"/memories/{memory.pk}/retire/", **HX).status_code == 403
    assert Memory.objects.get(pk=memory.pk).status == "active"


# ---------------------------------------------------------------------------------------------------- entities


def test_entity_list_user_wide_and_per_character(web, user, character, foreign):
    other = character_create(user=user, name="Tavi")
    _fact(
        user, character, "Corvin climbs.", entities=[{"name": "Corvin", "type": "person", "aliases": ["Old Corvin"]}]
    )
    _fact(user, other, "The harbour.", entities=[{"name": "Harbour", "type": "place"}])
    everything = _body(web.get("/memories/entities/"))
    assert "<html" in everything and "Corvin" in everything and "Harbour" in everything and "Zed" not in everything
    assert "Old Corvin" in everything
    minas = _body(web.get("/memories/entities/", {"character": character.pk}, **HX))
    assert "<html" not in minas and "Corvin" in minas and "Harbour" not in minas
    searched = _body(web.get("/memories/entities/", {"q": "harb"}, **HX))
    assert "Harbour" in searched and "Corvin" not in searched
    assert web.get("/memories/entities/", {"character": foreign["character"].pk}).status_code == 404
    assert web.get("/memories/entities/", {"character": "x"}).status_code == 400
    assert web.get("/memories/entities/", {"character": "²"}).status_code == 400  # a digit to isdigit, not to int()


def test_one_name_in_two_registries_says_which_registry_each_is(web, user, character):
    entities_ensure(user=user, character=character, entities=[{"name": "Mira", "type": "person"}])
    entities_ensure(user=user, character=None, entities=[{"name": "Mira", "type": "person"}])
    page = _body(web.get("/memories/entities/"))
    tags = re.findall(r'<span class="registry-tag">· ([^<]+)</span>', page)
    assert sorted(tags) == sorted([f"{character.name}’s registry", "all characters"])


def test_entity_detail_lists_linked_memories_and_edits(web, user, character, foreign):
    _fact(user, character, "Corvin climbs the tower.", entities=[{"name": "Corvin"}])
    _fact(user, character, "Unrelated.")
    _fact(user, character, "Someone named Tam.", entities=[{"name": "Tam"}])
    corvin = Entity.objects.get(name="Corvin")
    html = _body(web.get(f"/memories/entities/{corvin.pk}/"))
    assert "<html" in html and "Corvin climbs the tower." in html and "Unrelated." not in html
    assert 'id="entity-memories"' in html
    assert "<html" not in _body(web.get(f"/memories/entities/{corvin.pk}/", **HX))

    response = web.post(
        f"/memories/entities/{corvin.pk}/",
        {"name": "Corvin Ash", "type": "person", "aliases": "Corvin, Old Ash"},
        **HX,
    )
    assert response.status_code == 200 and "Corvin Ash" in _body(response) and "Saved." in _body(response)
    corvin.refresh_from_db()
    assert (corvin.name, corvin.type, corvin.aliases) == ("Corvin Ash", "person", ["Corvin", "Old Ash"])

    clash = web.post(f"/memories/entities/{corvin.pk}/", {"name": "tam", "type": "", "aliases": ""}, **HX)
    assert clash.status_code == 400 and "Another entity already has that name." in _body(clash)
    missing = web.post(f"/memories/entities/{corvin.pk}/", {"name": "", "type": "", "aliases": ""})
    assert missing.status_code == 400 and "<html" in _body(missing)
    plain = web.post(f"/memories/entities/{corvin.pk}/", {"name": "Corvin", "type": "person", "aliases": ""})
    assert plain.status_code == 302 and plain["Location"] == f"/memories/entities/{corvin.pk}/"
    assert Entity.objects.get(pk=corvin.pk).aliases == []

    entity_pk = foreign["entity"].pk
    assert web.get(f"/memories/entities/{entity_pk}/").status_code == 404
    assert web.post(f"/memories/entities/{entity_pk}/", {"name": "Mine"}, **HX).status_code == 404
    assert Entity.objects.get(pk=entity_pk).name == "Zed"


# ---------------------------------------------------------------------------------------------------- settings


def test_settings_page_saves_and_never_shows_the_key(web, user):
    page = _body(web.get("/memories/settings/"))
    assert "<html" in page and "re-embeds" in page and "none stored" in page
    data = {
        "provider": "openai",
        "model": "text-embedding-3-small",
        "base_url": "https://api.example.test/v1",
        "api_key": "sk-very-secret",
        "dimensions": "512",
    }
    response = web.post("/memories/settings/", data)
    assert response.status_code == 302 and response["Location"] == "/memories/settings/"
    own = EmbeddingSettings.objects.get(user=user)
    assert (own.provider, own.model, own.dimensions) == ("openai", "text-embedding-3-small", 512)
    assert own.api_key_encrypted and "sk-very-secret" not in own.api_key_encrypted
    page = _body(web.get("/memories/settings/"))
    assert "sk-very-secret" not in page and "a key is stored" in page
    assert "openai:text-embedding-3-small@512" in page and 'name="clear_api_key"' in page

    # An empty key field keeps the stored key; the checkbox clears it.
    web.post("/memories/settings/", {**data, "api_key": "", "model": "other-model"})
    own.refresh_from_db()
    assert own.model == "other-model" and own.api_key_encrypted
    web.post("/memories/settings/", {**data, "api_key": "", "clear_api_key": "on"})
    assert "none stored" in _body(web.get("/memories/settings/"))

    web.post("/memories/settings/", {"provider": "deployment"})
    assert not EmbeddingSettings.objects.filter(user=user).exists()


def test_settings_errors_are_shown_next_to_fields(web, user):
    response = web.post("/memories/settings/", {"provider": "local", "base_url": "http://x.test"})
    assert response.status_code == 400 and "The local provider takes no URL." in _body(response)
    response = web.post("/memories/settings/", {"provider": "martian", "api_key": "sk-leak"})
    assert response.status_code == 400 and 'class="field-error"' in _body(response)
    assert "sk-leak" not in _body(response)
    response = web.post("/memories/settings/", {"provider": "openai", "api_key": "k", "clear_api_key": "on"})
    assert response.status_code == 400 and "not both" in _body(response)
    assert not EmbeddingSettings.objects.filter(user=user).exists()


# ---------------------------------------------------------------------------------------------------- chat page


def test_chat_and_character_pages_link_to_the_browser(web, user, character, mira_chat):
    chat_page = _body(web.get(f"/chats/{mira_chat.pk}/"))
    assert f'href="/chats/{mira_chat.pk}/memories/"' in chat_page
    assert f'hx-get="/chats/{mira_chat.pk}/memories/progress/" hx-trigger="load"' in chat_page
    assert f'href="/characters/{character.pk}/memories/"' in _body(web.get(f"/characters/{character.pk}/"))
    assert 'href="/memories/"' in chat_page


def test_progress_fragment_polls_while_pending_and_stops_when_done(web, user, mira_chat):
    add_messages(mira_chat, 5)
    url = f"/chats/{mira_chat.pk}/memories/progress/"
    pending = _body(web.get(url, **HX))
    assert "Recall index: 0 of 5 messages indexed" in pending
    assert f'hx-get="{url}" hx-trigger="every 2s"' in pending
    chat_index_messages(chat_id=mira_chat.pk)
    done = _body(web.get(url, **HX))
    assert "Recall index: complete (5 messages)" in done and "hx-trigger" not in done


def test_progress_counts_vectors_of_the_current_model(
    web, user, mira_chat, scripted, django_capture_on_commit_callbacks
):
    add_messages(mira_chat, 3)
    chat_index_messages(chat_id=mira_chat.pk)
    url = f"/chats/{mira_chat.pk}/memories/progress/"
    assert "0 of 3 messages indexed" in _body(web.get(url, **HX))
    from apps.memories.services.indexing import memories_embed_pending

    memories_embed_pending(user_id=user.pk)
    done = _body(web.get(url, **HX))
    assert "complete (3 messages)" in done and "every 2s" not in done


def test_a_memory_made_from_a_stretch_of_the_chat_shows_it_as_a_range(web, user, character, mira_chat):
    indices = [*range(2640, 2680), 2700]
    memory_create(user=user, chat=mira_chat, kind="summary", content="The long siege.", source_message_indices=indices)
    page = web.get(f"/chats/{mira_chat.pk}/memories/").content.decode()
    assert "#2640–#2679</a>, " in page and "#2700</a>" in page
    assert "?at=2640" in page and "#2650" not in page and "in all" not in page


def test_a_message_index_past_what_the_database_holds_is_a_form_error():
    """valid_from past a PostgreSQL integer reached the save (a 500); the API's serializer capped it already."""
    from apps.memories.forms import MemoryEditForm

    base = {"version": 1, "content": "x", "kind": "fact", "importance": 2, "confidence": 0.5}
    form = MemoryEditForm({**base, "valid_from": 3_000_000_000})
    assert not form.is_valid() and "valid_from" in form.errors
    assert MemoryEditForm({**base, "valid_from": 2**31 - 1}).is_valid()
