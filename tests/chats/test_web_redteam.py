"""Red team of the web chat: its page and htmx panels (persona, chat lore, who replies: apps/common/panels.py), the
small forms beside them, what they render of a person's own hostile text, and what one person can make the server
do for everyone. Each fault it found is fixed; the tests say what it found."""

from __future__ import annotations

import re
import secrets

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.chats.models import Chat, ChatRevision, Message, Persona
from apps.chats.services.chats import chat_import
from apps.chats.services.personas import persona_create
from apps.chats.services.start import chat_start
from apps.generation.models import Generation
from apps.llm.services import connection_create
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_import
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import fixture_bytes, stream

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
MARKUP = "<script>alert(1)</script><img src=x onerror=alert(2)>`</code><svg onload=alert(3)>`'\"<b hx-get=/x>"
RAW = re.compile(r"<script>alert|<img src=x|<svg onload|<b hx-get")  # any of MARKUP's tags, unescaped


def _row(model, pk) -> dict:
    return model.objects.filter(pk=pk).values().get()


@pytest.fixture
def group(user, character):
    """A group chat of two characters, so that every panel of the chat page is there."""
    return chat_start(user=user, characters=[CharacterFactory(user=user, name="Sera"), character])


def _panels(chat_id: int, group_id: int) -> list[str]:
    return [f"/chats/{chat_id}/persona/", f"/lorebooks/chats/{chat_id}/", f"/chats/{group_id}/reply-order/"]


# --------------------------------------------------------------------------------- bad input: an empty POST


@pytest.mark.parametrize("panel", [0, 1, 2])
def test_an_empty_post_to_a_panel_names_the_field_or_is_a_choice(web, mira_chat, group, panel):
    url = _panels(mira_chat.pk, group.pk)[panel]
    chat_id = group.pk if panel == 2 else mira_chat.pk
    before = _row(Chat, chat_id)
    response = web.post(url, **HX)
    if response.status_code == 400:  # refused: it says which field, and nothing changed
        assert 'class="field-error"' in response.content.decode()
        assert _row(Chat, chat_id) == before
    flash = web.get(web.post(url)["Location"]).content.decode()
    assert "not changed: ." not in flash


@pytest.mark.parametrize("page", ["list", "detail"])
def test_an_empty_post_to_a_persona_form_names_the_field(web, user, page):
    ash = persona_create(user=user, name="Ash", description="A wanderer.")
    response = web.post("/personas/" if page == "list" else f"/personas/{ash.pk}/")
    assert response.status_code == 400 and 'class="errorlist' in response.content.decode()
    assert list(Persona.objects.values()) == [_row(Persona, ash.pk)] and Persona.objects.get().name == "Ash"


# ------------------------------------------------------------------ oversized input, slow or kept for everyone


def _search(web, url: str, query: str) -> tuple[str, list[str]]:
    """The page's text for `?q=query`, and the SQL it ran."""
    with CaptureQueriesContext(connection) as queries:
        response = web.get(url, {"q": query})
    assert response.status_code == 200
    return response.content.decode(), [query["sql"] for query in queries.captured_queries]


# A search matched with ILIKE '%q%' costs the query's length times the text's: 2,000 characters over a book of
# 200,000-character entries (as a book may hold) took 9 s of the shared database, 4,000 over 20 entries 20 s; the
# chats list did the same against imported character names of any length. Matched with STRPOS (apps/common/holds.py),
# the same took hundredths. Asserted by what runs, not by a clock: no LIKE, and the search still finds, case aside.
def test_a_books_search_is_not_matched_by_a_pattern_whose_cost_multiplies(web, user):
    entries = {str(n): {"uid": n, "key": ["k"], "comment": f"Entry {n}", "content": "a" * 20_000} for n in range(3)}
    entries["3"] = {"uid": 3, "key": ["Harbour"], "comment": "The quay", "content": "The TOWER stands by 100%_sure"}
    book = lorebook_import(user=user, name="Big", data={"entries": entries})
    page, sql = _search(web, f"/lorebooks/{book.pk}/", "a" * 2000 + "b")
    assert "The quay" not in page and "Entry 0" not in page
    assert not [statement for statement in sql if " LIKE " in statement.upper()], sql
    for query in ("tower", "HARBOUR", "quay", "100%_"):  # content, keys, title; % and _ are no pattern
        page, _ = _search(web, f"/lorebooks/{book.pk}/", query)
        assert "The quay" in page and "Entry 0" not in page, query


def test_the_chats_search_is_not_matched_by_a_pattern_whose_cost_multiplies(web, api, user):
    header = b'{"user_name":"a","character_name":"' + b"a" * 20_000 + b'"}\n{"name":"a","is_user":true,"mes":"x"}'
    assert api.generic("POST", "/api/v1/chats/import", header, content_type="application/jsonl").status_code == 201
    corvin = b'{"user_name":"R","character_name":"Corvin"}\n{"name":"R","is_user":true,"mes":"x"}'
    chat_import(user=user, stream=stream(corvin), title="Storm Tower")
    page, sql = _search(web, "/chats/", "a" * 2000 + "b")
    assert "Storm Tower" not in page and not [statement for statement in sql if " LIKE " in statement.upper()], sql
    for query in ("storm tower", "CORVIN"):
        page, _ = _search(web, "/chats/", query)
        assert "Storm Tower" in page, query


def test_a_huge_refused_choice_is_not_echoed_nor_kept_in_the_session(web, mira_chat):
    huge = secrets.token_urlsafe(1_500_000)  # does not compress
    response = web.post(f"/lorebooks/chats/{mira_chat.pk}/", {"book": huge}, **HX)
    assert response.status_code == 400 and 'class="field-error"' in response.content.decode()
    assert len(response.content) < 100_000
    web.post(f"/lorebooks/chats/{mira_chat.pk}/", {"book": huge})
    assert max(len(session.session_data) for session in Session.objects.all()) < 100_000


# -------------------------------------------------------------------------- stored XSS: held (new coverage)


def test_hostile_names_and_texts_are_shown_as_text_in_the_panels_prompt_and_searches(web, user):
    """The fuzz test (tests/hostile) reads the chat page and the lists; here the fragments htmx swaps in (the three
    panels, the composer, a message, its swipes), the Prompt inspector, the searches and a notice (`ticks`)."""
    mira = CharacterFactory(user=user, name=f"Mira {MARKUP}")
    persona = persona_create(user=user, name=f"A {MARKUP}")
    chat = chat_start(user=user, characters=[mira, CharacterFactory(user=user, name=f"Sera {MARKUP}")],
                      persona=persona, title=f"T {MARKUP}")  # fmt: skip
    entry = {"uid": 1, "key": [f"lantern {MARKUP}"], "content": f"lantern {MARKUP}", "comment": MARKUP}
    book = lorebook_import(
        user=user, name="B <img src=x onerror=alert(2)>`<svg onload=1>`", data={"entries": {"1": entry}}
    )
    Chat.objects.filter(pk=chat.pk).update(chat_metadata={"world_info": book.name}, message_count=1)
    for n in range(2):
        connection_create(user=user, name=f"c{n}{MARKUP}", base_url="http://127.0.0.1:9/v1", model=MARKUP)
    why = {"why": "key", "key": MARKUP, "secondary": MARKUP, "group": MARKUP}
    lore = {
        "entries": [{"comment": MARKUP, "world": MARKUP, "uid": MARKUP, "position": MARKUP, "why": why}],
        "books": [MARKUP, MARKUP],
        "budget": MARKUP,
        "problems": [MARKUP],
        "regex_timed_out": [MARKUP],
    }
    generation = Generation.objects.create(
        user=user, chat=chat, mode="new", state="failed", character_name=MARKUP, model=MARKUP, error=MARKUP,
        prompt=[{"role": MARKUP, "content": MARKUP}], prompt_info={"lorebook": lore},
    )  # fmt: skip
    extra = {"lorekeeper": {"generation": str(generation.uid), "state": MARKUP}}
    Message.objects.create(chat=chat, index=0, name=MARKUP, mes=MARKUP, extra=extra, swipes=[MARKUP, MARKUP])
    assert web.post("/personas/", {"name": f"`{MARKUP[:80]}`"}).status_code == 302  # its notice: "Saved `…`."
    c = chat.pk
    urls = [
        *_panels(c, c),
        f"/chats/{c}/composer/",
        f"/chats/{c}/messages/0/",
        f"/chats/{c}/messages/0/swipes/",
        f"/chats/{c}/messages/0/prompt/",
        f"/chats/{c}/search/?q={MARKUP}",
        f"/lorebooks/search/?q=lantern&chat={c}",
        f"/lorebooks/search/?q={MARKUP}",
        f"/lorebooks/{book.pk}/?q=lantern",
        f"/lorebooks/?q={MARKUP}",
    ]
    flash = web.get(f"/chats/{c}/").content.decode()
    assert "<code>&lt;script&gt;alert(1)&lt;" in flash and not RAW.search(flash)
    for url in urls:
        for headers in ({}, HX):
            response = web.get(url, **headers)
            assert response.status_code == 200, url
            assert not RAW.search(response.content.decode()), url
    assert "alert(3)" in web.get(f"/chats/{c}/messages/0/prompt/").content.decode()  # the prompt was shown


# ---------------------------------------------------------------- tenancy through form fields: held


def test_another_persons_ids_in_form_fields_reach_nothing(web, user, other_user, mira_chat, character):
    """Ids of Bob's in the fields of Alice's own forms: the chat panel's persona, "New chat"'s persona, a revision
    to restore into her chat, the generation her message's extra names (the Prompt page)."""
    bo = persona_create(user=other_user, name="Bo Hawthorne")
    theirs = chat_import(user=other_user, stream=stream(fixture_bytes("current_swipes.jsonl")), title="Theirs")
    revision = ChatRevision.objects.create(
        chat=theirs, reason="t", integrity=theirs.integrity, message_count=1, jsonl_gzip=b""
    )
    secret = Generation.objects.create(
        user=other_user, chat=theirs, mode="new", state="done", prompt=[{"role": "system", "content": "Bob secret"}]
    )
    Message.objects.create(chat=mira_chat, index=0, mes="Hi.", extra={"lorekeeper": {"generation": str(secret.uid)}})
    Chat.objects.filter(pk=mira_chat.pk).update(message_count=1)
    mine, bobs = _row(Chat, mira_chat.pk), _row(Chat, theirs.pk)

    refused = web.post(f"/chats/{mira_chat.pk}/persona/", {"persona": bo.pk}, **HX)
    assert refused.status_code == 400 and 'class="field-error"' in refused.content.decode()
    assert "Bo Hawthorne" not in refused.content.decode()
    assert web.post(f"/characters/{character.pk}/chats/new/", {"persona": bo.pk}).status_code == 302
    assert Chat.objects.filter(user=user).count() == 1 and not Chat.objects.filter(persona=bo).exists()
    restore = f"/chats/{mira_chat.pk}/revisions/{revision.pk}/restore/"
    assert web.post(restore, {"integrity": str(mira_chat.integrity)}).status_code == 404
    prompt = web.get(f"/chats/{mira_chat.pk}/messages/0/prompt/")
    assert prompt.status_code == 404 and "Bob secret" not in prompt.content.decode()
    assert _row(Chat, mira_chat.pk) == mine and _row(Chat, theirs.pk) == bobs
    assert ChatRevision.objects.filter(chat=mira_chat).count() == 0


# ------------------------------------------------------------------------- GET changes nothing: held


def test_the_panels_and_the_chat_pages_fragments_change_nothing_on_get(web, user, mira_chat, group):
    """A GET carrying what a POST would (a link, a prefetch) shows the form; the recap and legacy offers read."""
    ash = persona_create(user=user, name="Ash")
    lorebook_import(user=user, name="Harbour", data={"entries": {}})
    before = (_row(Chat, mira_chat.pk), _row(Chat, group.pk), list(Lorebook.objects.values()))
    for url, query in (
        (f"/chats/{mira_chat.pk}/persona/", {"persona": ash.pk}),
        (f"/lorebooks/chats/{mira_chat.pk}/", {"book": "Harbour"}),
        (f"/chats/{group.pk}/reply-order/", {"reply_order": "manual"}),
        (f"/chats/{mira_chat.pk}/recap/", {}),
        (f"/chats/{mira_chat.pk}/legacy-import/", {}),
        (f"/chats/{mira_chat.pk}/composer/", {"connection": 1, "message": "Hi."}),
    ):
        assert web.get(url, query, **HX).status_code == 200, url
    assert (_row(Chat, mira_chat.pk), _row(Chat, group.pk), list(Lorebook.objects.values())) == before


# ---------------------------------------------------------------- numbers past the columns' range: held


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/chats/{c}/older/?before={big}", 200),
        ("/chats/{c}/older/?before=-{big}", 200),
        ("/chats/{c}/newer/?after={big}", 200),
        ("/chats/{c}/messages/{big}/", 404),
        ("/chats/{c}/messages/{big}/swipes/", 404),
        ("/chats/{c}/messages/{big}/prompt/", 404),
        ("/lorebooks/search/?q=x&chat={big}", 404),
    ],
)
def test_numbers_past_an_id_columns_range_are_no_server_error(web, mira_chat, path, status):
    assert web.get(path.format(c=mira_chat.pk, big=10**20), **HX).status_code == status
