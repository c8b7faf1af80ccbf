"""The injection pages: the recall card under each user message of the chat page (read, edit, delete, re-run as
htmx fragments that tell the page the chat's new integrity, plain posts that redirect), the recall's subgraph drawn
with clickable nodes, the settings page with its trim statistics chart, and a chat's context preview. Another
user's chat is a 404; a visitor is sent to sign in."""

import json
import re
import uuid
from datetime import datetime

import pytest
from django.utils import timezone
from django.utils.html import escape

from apps.accounts.services import settings_document_get, settings_document_patch
from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.injection.models import InjectionState
from apps.injection.services.context import context_build
from apps.injection.services.settings import SLOTS, TIERS, InjectionSettings, injection_settings_save
from apps.memories.services.memories import memory_create
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import fresh
from tests.injection.helpers import ASK, DOG, say, stored

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
RECALLED = f"[Recalled for this turn]\n- {DOG}"
MAKE = "Recall memories for this message"
CONFLICT = "The chat changed elsewhere meanwhile: reload to see it."
SETTINGS_CONFLICT = "These settings were changed elsewhere since you opened this page: reload it to see them."


def html(response) -> str:
    return response.content.decode()


def recall_url(chat, rest: str = "", index: int = 1) -> str:
    return f"/chats/{chat.pk}/messages/{index}/recall/{rest}"


def slot(page: str, index: int = 1) -> str:
    """The recall slot of message `index`, up to the swipes container that follows it."""
    start = page.index(f'<div class="recall-slot" id="recall-slot-{index}">')
    return page[start : page.index(f'id="swipes-{index}"', start)]


def is_card(response, index: int = 1) -> bool:
    page = html(response)
    return "<html" not in page and page.lstrip().startswith(f'<div class="recall-slot" id="recall-slot-{index}">')


def integrity_event(response) -> str:
    return json.loads(response["HX-Trigger"])["lk-integrity"]["integrity"]


# -------------------------------------------------------------------------------------------- chat page


def test_the_chat_page_shows_the_recall_card_under_a_user_message_that_has_one(web, recalled):
    page = html(web.get(f"/chats/{recalled.pk}/"))
    card = slot(page)
    assert f'<pre class="recall-text">{escape(RECALLED)}</pre>' in card
    assert "Recall: 1 memory, about" in card
    assert "Show the graph" in card and f'hx-get="{recall_url(recalled, "graph/")}"' in card
    assert "Re-run recall" in card and f'action="{recall_url(recalled, "rerun/")}"' in card
    assert ">Delete</button>" in card and f'action="{recall_url(recalled, "delete/")}"' in card
    assert f'action="{recall_url(recalled, "edit/")}"' in card and 'name="injection_text"' in card
    assert MAKE not in card
    assert 'id="recall-slot-0"' not in page  # Mira's line has no recall slot
    assert f'data-integrity="{recalled.integrity}"' in page  # what the card's writes send


def test_the_card_says_a_memory_reached_the_prompt_through_the_long_term_slot_when_recall_found_none(
    web, user, story, character
):
    keeper = memory_create(
        user=user, kind="fact", content="The keeper's dog sleeps by the lamp.", character=character, importance=3,
        origin="extraction",
    )  # fmt: skip
    say(story, ("Mira", "Welcome back."), ("Rowan", ASK))
    context_build(user=user, chat=story, message=ASK)
    card = slot(html(web.get(f"/chats/{story.pk}/")))
    assert "Long-term: 1 memory · Recall: 0 memories</summary>" in card  # no "about 0 tokens" beside the memory
    assert f'<span class="recall-prompt-slot">Long-term</span> {escape(keeper.content)}' in card


def test_the_chat_page_offers_a_recall_under_a_user_message_without_one(web, story, facts):
    card = slot(html(web.get(f"/chats/{story.pk}/")))
    assert MAKE in card and f'hx-post="{recall_url(story, "rerun/")}"' in card
    assert 'class="recall-card"' not in card


def test_the_card_is_an_htmx_fragment_opened_on_request(web, recalled):
    response = web.get(recall_url(recalled), {"open": "1"}, **HX)
    assert response.status_code == 200 and is_card(response)
    assert '<details class="recall-card" open>' in html(response)
    assert integrity_event(response) == str(recalled.integrity)
    closed = web.get(recall_url(recalled), **HX)
    assert '<details class="recall-card">' in html(closed)


def test_the_card_says_which_hook_made_the_recall_and_when(web, recalled):
    made = timezone.localtime(datetime.fromisoformat(stored(recalled)["updatedAt"]))
    card = html(web.get(recall_url(recalled), **HX))
    assert f'<p class="meta">context {made:%Y-%m-%d %H:%M} · from “{escape(ASK)}” · ' in card


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_recall_time_a_client_wrote_at_the_edge_of_the_calendar_breaks_no_card(web, recalled, moment):
    # A client writes the record; the date filter showed this time in UTC, a year datetime does not hold.
    message = Message.objects.get(chat=recalled, index=1)
    record = {**message.extra["bme_recall"], "updatedAt": moment}
    Message.objects.filter(pk=message.pk).update(extra={**message.extra, "bme_recall": record})

    response = web.get(recall_url(recalled), **HX)

    assert response.status_code == 200 and is_card(response)
    assert '<p class="meta">context  · from' in html(response)  # no time shown
    assert web.get(f"/chats/{recalled.pk}/").status_code == 200


# ------------------------------------------------------------------------------------------------ writes


def test_editing_with_the_current_integrity_answers_the_edited_card_and_the_new_integrity(web, recalled):
    response = web.post(
        recall_url(recalled, "edit/"),
        {"injection_text": "Biscuit is a grey lurcher.", "integrity": str(recalled.integrity)},
        **HX,
    )
    assert response.status_code == 200 and is_card(response)
    card = html(response)
    assert '<pre class="recall-text">Biscuit is a grey lurcher.</pre>' in card and " · edited</summary>" in card
    current = fresh(recalled).integrity
    assert current != recalled.integrity and integrity_event(response) == str(current)
    assert stored(recalled)["injectionText"] == "Biscuit is a grey lurcher." and stored(recalled)["manuallyEdited"]


def test_editing_with_a_stale_integrity_says_so_and_leaves_the_recall_alone(web, recalled):
    response = web.post(
        recall_url(recalled, "edit/"), {"injection_text": "Biscuit is grey.", "integrity": str(uuid.uuid4())}, **HX
    )
    assert response.status_code == 409 and is_card(response)
    assert CONFLICT in html(response) and escape(RECALLED) in html(response)
    assert stored(recalled)["injectionText"] == RECALLED and not stored(recalled)["manuallyEdited"]
    assert integrity_event(response) == str(recalled.integrity) == str(fresh(recalled).integrity)


def test_deleting_answers_the_slot_offering_a_new_recall(web, recalled):
    response = web.post(recall_url(recalled, "delete/"), {"integrity": str(recalled.integrity)}, **HX)
    assert response.status_code == 200 and is_card(response)
    assert MAKE in html(response) and 'class="recall-card"' not in html(response)
    assert stored(recalled) is None and integrity_event(response) == str(fresh(recalled).integrity)


def test_re_running_a_message_without_a_recall_makes_one(web, story, facts):
    response = web.post(recall_url(story, "rerun/"), {"integrity": str(story.integrity)}, **HX)
    assert response.status_code == 200 and is_card(response)
    assert f'<pre class="recall-text">{escape(RECALLED)}</pre>' in html(response) and MAKE not in html(response)
    assert stored(story)["hookName"] == "rerun" and integrity_event(response) == str(fresh(story).integrity)


def test_re_running_a_message_that_is_not_the_users_is_refused_on_the_card(web, story, facts):
    response = web.post(recall_url(story, "rerun/", 0), {"integrity": str(story.integrity)}, **HX)
    assert response.status_code == 400 and "A recall belongs to a user message." in html(response)
    assert stored(story, 0) is None


@pytest.mark.parametrize(
    ("action", "data"),
    [("edit/", {"injection_text": "Biscuit is grey."}), ("delete/", {}), ("rerun/", {})],
)
def test_a_plain_post_redirects_to_the_message_on_the_chat_page(web, recalled, action, data):
    response = web.post(recall_url(recalled, action), {**data, "integrity": str(recalled.integrity)})
    assert response.status_code == 302 and response["Location"] == f"/chats/{recalled.pk}/?at=1"
    assert fresh(recalled).integrity != recalled.integrity


def test_a_plain_post_with_a_stale_integrity_redirects_to_the_chat_and_writes_nothing(web, recalled):
    response = web.post(recall_url(recalled, "edit/"), {"injection_text": "x", "integrity": str(uuid.uuid4())})
    assert response.status_code == 302 and response["Location"] == f"/chats/{recalled.pk}/"
    assert stored(recalled)["injectionText"] == RECALLED


# ------------------------------------------------------------------------------------------------- graph


def graph_links(page: str) -> list[str]:
    """The node URLs the graph's nodes load on a click, in drawing order."""
    return re.findall(r'<g class="node node-\w+"[^>]*? hx-get="([^"]+)"', page)


def test_the_graph_draws_a_circle_per_node_and_a_line_per_edge_each_node_linked(web, recalled, facts):
    response = web.get(recall_url(recalled, "graph/"), **HX)
    assert response.status_code == 200
    page = html(response)
    subgraph = stored(recalled)["subgraph"]
    assert "<svg" in page and "<html" not in page
    assert page.count("<circle ") == len(subgraph["nodes"]) == 2
    assert page.count("<line ") == len(subgraph["edges"]) == 1
    entity = facts["dog"].entities.get()
    assert graph_links(page) == [
        recall_url(recalled, f"graph/m{facts['dog'].pk}/"),
        recall_url(recalled, f"graph/e{entity.pk}/"),
    ]
    assert re.findall(r'data-node="(\w+)"', page) == [f"m{facts['dog'].pk}", f"e{entity.pk}"]
    assert 'class="edge edge-mentions"' in page and ">Biscuit</text>" in page


def test_the_graph_of_a_message_without_a_recall_is_not_found(web, story, facts):
    assert web.get(recall_url(story, "graph/"), **HX).status_code == 404


def test_a_memory_node_shows_the_memorys_content_and_its_score(web, recalled, facts):
    page = html(web.get(recall_url(recalled, "graph/"), **HX))
    response = web.get(graph_links(page)[0], **HX)
    assert response.status_code == 200
    score = stored(recalled)["memories"][0]["score"]
    assert escape(DOG) in html(response) and f"score {score}" in html(response)


def test_an_entity_node_shows_the_entitys_name(web, recalled):
    page = html(web.get(recall_url(recalled, "graph/"), **HX))
    response = web.get(graph_links(page)[1], **HX)
    assert response.status_code == 200 and "<strong>Biscuit</strong>" in html(response)


@pytest.mark.parametrize("node", ["x1", "m", "m-3", "mabc", "q3", "m1x", "e"])
def test_a_bad_node_id_is_not_found(web, recalled, node):
    assert web.get(recall_url(recalled, f"graph/{node}/"), **HX).status_code == 404


def test_another_users_memory_as_a_node_is_not_found(web, recalled, facts, other_user):
    theirs = CharacterFactory(user=other_user, name="Mira")
    memory = memory_create(user=other_user, kind="fact", content="Their secret.", character=theirs, origin="manual")
    link = graph_links(html(web.get(recall_url(recalled, "graph/"), **HX)))[0]
    assert link == recall_url(recalled, f"graph/m{facts['dog'].pk}/") and web.get(link, **HX).status_code == 200
    assert web.get(recall_url(recalled, f"graph/m{memory.pk}/"), **HX).status_code == 404


# ---------------------------------------------------------------------------------------------- settings


def settings_form(integrity, **changes) -> dict:
    """The settings page's form as the browser sends it with the defaults (checkboxes only when ticked)."""
    defaults = InjectionSettings()
    form = {
        "integrity": str(integrity),
        "budget_mode": defaults.budget_mode,
        "total_budget": str(defaults.total_budget),
        "triggered_limit": str(defaults.triggered_limit),
        "recent_messages": str(defaults.recent_messages),
        "recall_messages": "on",
    }
    for slot_spec in SLOTS:
        form[f"enabled_{slot_spec.name}"] = "on"
        form[f"depth_{slot_spec.name}"] = str(slot_spec.depth)
    form |= {f"budget_{tier}": str(defaults.budgets[tier]) for tier in TIERS}
    form |= changes
    return {key: value for key, value in form.items() if value is not None}


def test_the_settings_page_shows_every_slot_every_budget_tier_and_the_integrity(web, user):
    response = web.get("/memories/injection/")
    assert response.status_code == 200
    page = html(response)
    assert all(f"<code>smart_memory_{s.name}</code>" in page for s in SLOTS) and len(SLOTS) == 13
    assert all(f'name="budget_{tier}"' in page for tier in TIERS) and len(TIERS) == 10
    assert f'<input type="hidden" name="integrity" value="{settings_document_get(user=user).integrity}">' in page
    assert "No context built yet." in page


def test_saving_the_settings_stores_them_in_the_settings_document(web, user):
    integrity = settings_document_get(user=user).integrity
    form = settings_form(integrity, enabled_arcs=None, depth_session="9", budget_mode="simple", total_budget="3000")
    response = web.post("/memories/injection/", form)
    assert response.status_code == 302 and response["Location"] == "/memories/injection/"
    assert "Injection settings saved." in html(web.get(response["Location"]))
    document = settings_document_get(user=user)
    saved = document.data["smart_memory"]
    assert saved["slots"]["arcs"] == {"enabled": False, "depth": 2}
    assert saved["slots"]["session"] == {"enabled": True, "depth": 9}
    assert (saved["budget_mode"], saved["total_budget"]) == ("simple", 3000)
    assert document.integrity != integrity


def test_saving_the_settings_with_a_stale_integrity_is_refused(web, user):
    stale = settings_document_get(user=user).integrity
    injection_settings_save(user=user, values={"unified": True}, integrity=stale)  # another client, meanwhile
    current = settings_document_get(user=user).integrity
    response = web.post("/memories/injection/", settings_form(stale, depth_session="9"))
    assert response.status_code == 409 and SETTINGS_CONFLICT in html(response)
    assert f'name="integrity" value="{current}"' in html(response)
    assert settings_document_get(user=user).data["smart_memory"]["slots"]["session"]["depth"] == 3


def test_saving_a_budget_out_of_range_is_refused_naming_it(web, user):
    integrity = settings_document_get(user=user).integrity
    response = web.post("/memories/injection/", settings_form(integrity, budget_arcs="99999"))
    assert response.status_code == 400
    page = html(response)
    assert "The arcs budget is a whole number of tokens from 0 to 32000." in page
    assert re.findall(r'<div class="budget-row invalid">\s*<label for="budget_(\w+)">', page) == ["arcs"]
    assert settings_document_get(user=user).integrity == integrity


def test_the_settings_page_charts_the_last_builds_trim_statistics(web, user, recalled):
    page = html(web.get("/memories/injection/"))
    chart = page[page.index('<figure class="trim-chart">') :]
    assert "<svg" in chart and chart.count('<g transform="translate(0, ') == len(TIERS)
    assert 'class="chart-label">state ledger</text>' in chart and "No context built yet." not in page
    assert f'href="/chats/{recalled.pk}/context/"' in page


def test_the_settings_page_says_which_stored_values_fall_back_to_their_defaults(web, user):
    document = settings_document_get(user=user)
    patch = {"smart_memory": {"triggered_limit": 99}}
    settings_document_patch(user=user, patch=patch, kind="merge", integrity=document.integrity)
    page = html(web.get("/memories/injection/"))
    assert "fall back to their defaults: triggered_limit is a whole number from 0 to 50." in page
    assert 'name="triggered_limit" min="0" max="50" value="8"' in page


# --------------------------------------------------------------------------------------------- context page


def test_the_context_page_without_a_message_shows_the_form(web, story, facts):
    response = web.get(f"/chats/{story.pk}/context/")
    assert response.status_code == 200
    page = html(response)
    assert '<form method="get" class="inline context-form">' in page and 'name="message"' in page
    assert "context-slots" not in page and 'name="character"' not in page  # one character: no choice


def test_the_context_page_previews_a_message_without_writing_anything(web, story, facts):
    response = web.get(f"/chats/{story.pk}/context/", {"message": ASK})
    assert response.status_code == 200
    page = html(response)
    assert '<table class="table context-slots cards">' in page
    assert all(f'<td data-label="Slot"><code>smart_memory_{s.name}</code></td>' in page for s in SLOTS)
    assert "recall: new" in page and escape(DOG) in page and '<figure class="trim-chart">' in page
    assert stored(story) is None and fresh(story).integrity == story.integrity
    assert not InjectionState.objects.filter(chat=story).exists()


def test_the_context_page_without_a_message_previews_a_regeneration_with_the_kept_recall(web, recalled):
    response = web.get(f"/chats/{recalled.pk}/context/", {"message": ""})
    assert response.status_code == 200
    assert "recall: stored" in html(response) and escape(RECALLED) in html(response)
    assert InjectionState.objects.get(chat=recalled).builds == 1 and fresh(recalled).integrity == recalled.integrity


def test_the_context_page_for_a_character_not_in_the_chat_says_so(web, group):
    chat, _, _ = group
    response = web.get(f"/chats/{chat.pk}/context/", {"message": "Hi.", "character": "Corvin"})
    assert response.status_code == 400
    assert "That character does not take part in this chat." in html(response)
    assert '<option value="Mira">Mira</option>' in html(response)


# ------------------------------------------------------------------------------------------- tenancy, sign in

ROUTES = [
    ("get", "/chats/{chat}/context/"),
    ("get", "/chats/{chat}/messages/1/recall/"),
    ("post", "/chats/{chat}/messages/1/recall/edit/"),
    ("post", "/chats/{chat}/messages/1/recall/delete/"),
    ("post", "/chats/{chat}/messages/1/recall/rerun/"),
    ("get", "/chats/{chat}/messages/1/recall/graph/"),
    ("get", "/chats/{chat}/messages/1/recall/graph/m{memory}/"),
]


@pytest.fixture
def theirs(other_user):
    """Bob's chat with a recall on message 1 (made by hand: no search needed)."""
    character = CharacterFactory(user=other_user, name="Ash")
    chat = chat_create(user=other_user, title="Bob's", character_ids=[character.pk], user_name="Rowan")
    say(chat, ("Ash", "Hello."), ("Rowan", "Hi."))
    memory = memory_create(user=other_user, kind="fact", content="Ash is tall.", character=character, origin="manual")
    record = {"injectionText": "Ash is tall.", "memories": [{"id": memory.pk, "score": 0.5}], "subgraph": {}}
    Message.objects.filter(chat=chat, index=1).update(extra={"bme_recall": record})
    return {"chat": fresh(chat), "memory": memory}


@pytest.mark.parametrize(("method", "url"), ROUTES, ids=[f"{m} {u}" for m, u in ROUTES])
def test_another_users_chat_is_not_found_and_left_alone(web, theirs, method, url):
    chat = theirs["chat"]
    data = {"injection_text": "mine now", "integrity": str(chat.integrity)} if method == "post" else {}
    response = getattr(web, method)(url.format(chat=chat.pk, memory=theirs["memory"].pk), data, **HX)
    assert response.status_code == 404
    assert stored(chat)["injectionText"] == "Ash is tall." and fresh(chat).integrity == chat.integrity


@pytest.mark.parametrize(
    ("method", "url"), [*ROUTES, ("get", "/memories/injection/"), ("post", "/memories/injection/")]
)
def test_a_visitor_is_sent_to_sign_in(client, theirs, method, url):
    chat = theirs["chat"]
    response = getattr(client, method)(url.format(chat=chat.pk, memory=theirs["memory"].pk))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert stored(chat)["injectionText"] == "Ash is tall." and fresh(chat).integrity == chat.integrity


# ------------------------------------------------------------------------------------------- a client's records

CLIENT_RECORDS = {
    "no manuallyEdited": {"injectionText": "Remembered."},
    "a prompt entry's memories a number": {
        "injectionText": "x", "prompt": [{"slot": "x", "count": 1, "label": "L", "memories": 5}],
    },
    "memories not objects": {"injectionText": "x", "memories": [1, 7, "abc"]},
    "nodes of a listed type, and of ids no link can carry": {
        "injectionText": "x",
        "subgraph": {"nodes": [{"id": "m1", "type": ["memory"]}, {"id": "a/b", "type": "memory"},
                               {"id": "", "type": "entity"}, {"id": "m2", "type": "memory", "label": "kept"}]},
    },
    "edges joining lists": {
        "injectionText": "x",
        "subgraph": {"nodes": [{"id": "m1", "type": "memory", "label": "a"}],
                     "edges": [{"source": "m1", "target": ["x"]}, {"source": ["m1"], "target": "e1"}]},
    },
}  # fmt: skip


@pytest.mark.parametrize("record", CLIENT_RECORDS.values(), ids=list(CLIENT_RECORDS))
def test_a_recall_record_a_client_sent_in_another_shape_breaks_no_page(web, user, record):
    """Records come from clients (an imported chat's `extra.bme_recall`): each of these was a server error on the
    chat's page, its recall card, graph, a node, or the context page (the stored recall injected)."""
    character = CharacterFactory(user=user, name="Mira")
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    say(chat, ("Mira", "Hello."), ("Rowan", "Hi."))
    memory = memory_create(user=user, kind="fact", content="Mira is tall.", character=character, origin="manual")
    Message.objects.filter(chat=chat, index=1).update(extra={"bme_recall": record})
    chat = fresh(chat)
    assert "recall-card" in slot(html(web.get(f"/chats/{chat.pk}/")))
    for url in (recall_url(chat), recall_url(chat, "graph/"), recall_url(chat, f"graph/m{memory.pk}/")):
        assert web.get(url, **HX).status_code == 200, url
    assert web.get(f"/chats/{chat.pk}/messages/1/").status_code == 200
    assert web.get(f"/chats/{chat.pk}/context/", {"message": ""}).status_code == 200
    assert context_build(user=user, chat=chat).recall["source"] == "stored"


@pytest.mark.parametrize("node", ["m²", "e²"])
def test_a_node_id_of_a_superscript_digit_is_not_found(web, recalled, node):
    """A superscript "²" is a digit to str.isdigit but not to int(): a server error before."""
    assert web.get(recall_url(recalled, f"graph/{node}/"), **HX).status_code == 404
