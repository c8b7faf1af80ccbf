"""The context builder and persistent recall over the API: a context's shape (13 slots, 11 macros, SillyTavern's
extension prompts, per-tier budgets, the recall and the chat's integrity as ETag), the last build, a user message's
recall read, edited, deleted and re-run under If-Match, and the injection settings as the builder reads them.
Another user's chat is a 404 on every route; a visitor is unauthorised."""

import json
import uuid

import pytest
from rest_framework.test import APIClient

from apps.chats.models import Message
from apps.injection.models import InjectionState
from apps.injection.services.settings import SLOTS, TIERS, InjectionSettings
from tests.chats.helpers import fresh, if_match
from tests.injection.helpers import ASK, DOG, say, stored

pytestmark = pytest.mark.django_db

SLOT_FIELDS = {
    "name",
    "label",
    "text",
    "content",
    "tokens",
    "position",
    "depth",
    "role",
    "enabled",
    "delivery",
    "memory_ids",
}
KEYS = {f"smart_memory_{slot.name}" for slot in SLOTS}


def etag(response) -> str:
    return response["ETag"].strip('"')


def context_url(chat) -> str:
    return f"/api/v1/chats/{chat.pk}/context"


def recall_url(chat, index: int = 1, rest: str = "") -> str:
    return f"/api/v1/chats/{chat.pk}/messages/{index}/recall{rest}"


# ------------------------------------------------------------------------------------------------- context


def test_a_context_answers_13_slots_11_macros_the_sillytavern_payload_budgets_and_the_recall(api, story, facts):
    response = api.post(context_url(story), {"message": ASK}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {
        "chat",
        "integrity",
        "character",
        "turn",
        "turn_scores",
        "unified",
        "slots",
        "macros",
        "sillytavern",
        "budgets",
        "injected_tokens",
        "recall",
        "timings_ms",
        "preview",
    }
    assert (body["chat"], body["character"], body["turn"], body["unified"], body["preview"]) == (
        story.pk,
        "Mira",
        "dialogue",
        False,
        False,
    )
    slots = body["slots"]
    assert set(slots) == KEYS and len(slots) == 13
    assert all(set(slot) == SLOT_FIELDS for slot in slots.values())
    assert all(slots[f"smart_memory_{slot.name}"]["name"] == slot.name for slot in SLOTS)
    assert slots["smart_memory_triggered"]["text"] == f"[Recalled for this turn]\n- {DOG}"
    assert slots["smart_memory_triggered"]["memory_ids"] == [facts["dog"].pk]
    assert (slots["smart_memory_triggered"]["position"], slots["smart_memory_triggered"]["depth"]) == ("in_chat", 4)
    assert len(body["macros"]) == 11
    assert all(token.startswith("{{smartmemory-") and token.endswith("}}") for token in body["macros"])
    st = body["sillytavern"]
    assert len(st) == 13 and {item["key"] for item in st} == KEYS
    assert all(isinstance(item["position"], int) and isinstance(item["role"], int) for item in st)
    assert all(set(item) == {"key", "value", "position", "depth", "scan", "role"} for item in st)
    assert set(body["budgets"]) == set(TIERS)
    assert all(set(tier) == {"budget", "injected", "full"} for tier in body["budgets"].values())
    assert body["budgets"]["long"]["budget"] == 60
    assert body["injected_tokens"] == sum(s["tokens"] for s in slots.values() if s["delivery"] == "prompt")
    recall = body["recall"]
    assert (recall["source"], recall["stored"], recall["message_index"]) == ("new", True, 1)
    assert recall["bme_recall"]["injectionText"] == slots["smart_memory_triggered"]["text"]
    current = fresh(story).integrity
    assert body["integrity"] == etag(response) == str(current) and current != story.integrity


def test_a_context_for_the_chats_last_user_message_keeps_its_recall_on_that_message(api, story, facts):
    built = api.post(context_url(story), {"message": ASK}, format="json").json()
    response = api.get(recall_url(story))
    assert response.status_code == 200
    recall = response.json()["recall"]
    assert recall["injectionText"] == built["slots"]["smart_memory_triggered"]["text"]
    assert (recall["hookName"], recall["recallInput"], recall["manuallyEdited"]) == ("context", ASK, False)
    assert response.json()["integrity"] == etag(response) == built["integrity"]


def test_a_preview_context_writes_nothing(api, story, facts):
    response = api.post(context_url(story), {"message": ASK, "preview": True}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["preview"] is True and body["recall"]["source"] == "new" and body["recall"]["stored"] is False
    assert body["integrity"] == etag(response) == str(story.integrity) == str(fresh(story).integrity)
    assert stored(story) is None and not InjectionState.objects.filter(chat=story).exists()
    assert api.get(recall_url(story)).json()["recall"] is None


def test_a_context_for_a_message_not_in_the_chat_yet_answers_its_recall_without_storing_it(api, story, facts):
    response = api.post(context_url(story), {"message": "And the lighthouse keeper's old dog?"}, format="json")
    assert response.status_code == 200
    recall = response.json()["recall"]
    assert (recall["source"], recall["stored"], recall["message_index"]) == ("new", False, None)
    assert recall["bme_recall"]["injectionText"].endswith(DOG)
    assert etag(response) == response.json()["integrity"] == str(fresh(story).integrity) == str(story.integrity)
    assert stored(story) is None and InjectionState.objects.get(chat=story).builds == 1


def test_a_context_for_a_character_not_in_the_chat_is_refused_naming_character(api, story, facts):
    response = api.post(context_url(story), {"message": ASK, "character": "Tobin"}, format="json")
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "character"
    assert stored(story) is None


def test_a_context_for_the_named_character_of_a_group_chat_labels_what_they_know(api, group):
    chat, _, tobin = group
    say(chat, ("Mira", "Hello."), ("Rowan", "Hi both."))
    body = api.post(context_url(chat), {"message": "Hi both.", "character": "tobin"}, format="json").json()
    assert body["character"] == "Tobin"
    assert body["slots"]["smart_memory_epistemic"]["label"] == "What Tobin knows"


def test_a_context_with_a_nul_character_in_the_message_is_refused(api, story, facts):
    response = api.post(context_url(story), {"message": "The dog\u0000 barked."}, format="json")
    assert response.status_code == 400
    assert "message" in response.json()
    assert not InjectionState.objects.filter(chat=story).exists()


def test_the_last_context_is_empty_before_any_build(api, story):
    response = api.get(context_url(story))
    assert response.status_code == 200
    assert response.json() == {"built_at": None, "slots": {}, "macros": {}, "stats": {}, "turn": "", "builds": 0}
    assert response["ETag"] == f'"{story.integrity}"'


def test_the_last_context_after_a_build_has_its_slots_macros_stats_turn_and_builds(api, story, facts):
    built = api.post(context_url(story), {"message": ASK}, format="json").json()
    api.post(context_url(story), {}, format="json")  # a regeneration: a second build
    body = api.get(context_url(story)).json()
    assert set(body) == {"built_at", "slots", "macros", "stats", "turn", "builds"}
    assert body["built_at"] and body["turn"] == "dialogue" and body["builds"] == 2
    assert set(body["slots"]) == KEYS
    assert body["slots"]["smart_memory_triggered"]["text"] == built["slots"]["smart_memory_triggered"]["content"]
    assert body["slots"]["smart_memory_triggered"]["memory_ids"] == []  # a kept recall: its text as it is
    assert len(body["macros"]) == 11 and set(body["stats"]) == set(TIERS)


# -------------------------------------------------------------------------------------------------- recall


def test_the_recall_of_a_message_without_one_is_null_with_the_chats_integrity(api, story, facts):
    response = api.get(recall_url(story))
    assert response.status_code == 200
    assert response.json() == {"recall": None, "integrity": str(story.integrity)}
    assert etag(response) == str(story.integrity)


def test_editing_a_recall_needs_if_match(api, recalled):
    response = api.patch(recall_url(recalled), {"injection_text": "Biscuit is grey."}, format="json")
    assert response.status_code == 428
    assert stored(recalled)["injectionText"] == f"[Recalled for this turn]\n- {DOG}"


def test_editing_a_recall_with_a_stale_integrity_is_a_conflict(api, recalled):
    response = api.patch(
        recall_url(recalled), {"injection_text": "Biscuit is grey."}, format="json", **if_match(uuid.uuid4())
    )
    assert response.status_code == 409
    assert stored(recalled)["injectionText"] == f"[Recalled for this turn]\n- {DOG}"
    assert fresh(recalled).integrity == recalled.integrity


def test_editing_a_recall_replaces_its_text_marks_it_edited_and_answers_the_new_integrity(api, recalled):
    response = api.patch(
        recall_url(recalled), {"injection_text": "  Biscuit is grey.  "}, format="json", **if_match(recalled.integrity)
    )
    assert response.status_code == 200, response.content
    recall = response.json()["recall"]
    assert recall["manuallyEdited"] is True and recall["injectionText"] == "Biscuit is grey."
    current = fresh(recalled).integrity
    assert current != recalled.integrity and etag(response) == response.json()["integrity"] == str(current)
    assert stored(recalled)["injectionText"] == "Biscuit is grey." and stored(recalled)["manuallyEdited"]


def test_an_edit_retried_with_its_idempotency_key_is_answered_again_without_a_conflict(api, recalled):
    headers = {**if_match(recalled.integrity), "HTTP_IDEMPOTENCY_KEY": "edit-1"}
    first = api.patch(recall_url(recalled), {"injection_text": "Biscuit is grey."}, format="json", **headers)
    again = api.patch(recall_url(recalled), {"injection_text": "Biscuit is grey."}, format="json", **headers)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json() and etag(again) == etag(first)
    assert str(fresh(recalled).integrity) == etag(first)


def test_editing_a_message_without_a_recall_is_refused(api, story, facts):
    response = api.patch(recall_url(story), {"injection_text": "x"}, format="json", **if_match(story.integrity))
    assert response.status_code == 400 and response.json()["extra"]["field"] == "index"
    assert stored(story) is None


def test_editing_the_recall_of_a_message_that_is_not_the_users_is_refused(api, recalled):
    record = stored(recalled)
    Message.objects.filter(chat=recalled, index=0).update(extra={"bme_recall": record})  # as a client might put it
    response = api.patch(
        recall_url(recalled, 0), {"injection_text": "x"}, format="json", **if_match(recalled.integrity)
    )
    assert response.status_code == 400 and response.json()["extra"]["field"] == "index"
    assert stored(recalled, 0)["injectionText"] == record["injectionText"]


def test_deleting_a_recall_needs_if_match_and_leaves_the_message_without_one(api, recalled):
    assert api.delete(recall_url(recalled)).status_code == 428
    assert stored(recalled) is not None
    response = api.delete(recall_url(recalled), **if_match(recalled.integrity))
    assert response.status_code == 200
    current = fresh(recalled).integrity
    assert response.json() == {"recall": None, "integrity": str(current)} and etag(response) == str(current)
    assert api.get(recall_url(recalled)).json()["recall"] is None and stored(recalled) is None


def test_deleting_a_recall_with_a_stale_integrity_is_a_conflict(api, recalled):
    assert api.delete(recall_url(recalled), **if_match(uuid.uuid4())).status_code == 409
    assert stored(recalled) is not None


def test_re_running_a_recall_searches_again_and_overwrites_an_edit(api, recalled):
    edited = api.patch(
        recall_url(recalled), {"injection_text": "Biscuit is grey."}, format="json", **if_match(recalled.integrity)
    )
    response = api.post(recall_url(recalled, rest="/rerun"), **if_match(etag(edited)))
    assert response.status_code == 200, response.content
    recall = response.json()["recall"]
    assert recall["hookName"] == "rerun" and recall["manuallyEdited"] is False
    assert recall["injectionText"] == f"[Recalled for this turn]\n- {DOG}"
    assert etag(response) == response.json()["integrity"] == str(fresh(recalled).integrity) != etag(edited)
    assert stored(recalled)["hookName"] == "rerun"


def test_re_running_makes_a_recall_for_a_message_without_one(api, story, facts):
    response = api.post(recall_url(story, rest="/rerun"), **if_match(story.integrity))
    assert response.status_code == 200
    assert response.json()["recall"]["selectedNodeIds"] == [f"m{facts['dog'].pk}"]
    assert stored(story)["hookName"] == "rerun"


def test_re_running_needs_if_match_and_a_current_integrity(api, story, facts):
    assert api.post(recall_url(story, rest="/rerun")).status_code == 428
    assert api.post(recall_url(story, rest="/rerun"), **if_match(uuid.uuid4())).status_code == 409
    assert stored(story) is None


def test_re_running_the_recall_of_a_message_that_is_not_the_users_is_refused(api, story, facts):
    response = api.post(recall_url(story, 0, "/rerun"), **if_match(story.integrity))
    assert response.status_code == 400 and response.json()["extra"]["field"] == "index"
    assert stored(story, 0) is None


@pytest.mark.parametrize(
    ("method", "rest", "body"),
    [("get", "", None), ("patch", "", {"injection_text": "x"}), ("delete", "", None), ("post", "/rerun", None)],
)
def test_a_message_index_past_the_chat_is_not_found(api, recalled, method, rest, body):
    response = getattr(api, method)(recall_url(recalled, 7, rest), body, format="json", **if_match(recalled.integrity))
    assert response.status_code == 404
    assert fresh(recalled).integrity == recalled.integrity


# ------------------------------------------------------------------------------------------------ settings


def test_the_injection_settings_are_the_defaults_at_first_with_the_documents_integrity(api):
    response = api.get("/api/v1/injection/settings")
    assert response.status_code == 200
    body = response.json()
    assert body["settings"] == InjectionSettings().as_document() and body["problems"] == []
    assert body["integrity"] == api.get("/api/v1/settings").json()["integrity"]


def test_the_injection_settings_show_a_bad_stored_value_as_a_problem_and_use_its_default(api):
    integrity = api.get("/api/v1/settings").json()["integrity"]
    patch = {"smart_memory": {"slots": {"arcs": {"enabled": False, "depth": 7}}, "budgets": {"long": -5}}}
    patched = api.generic(
        "PATCH",
        "/api/v1/settings",
        json.dumps(patch),
        content_type="application/merge-patch+json",
        **if_match(integrity),
    )
    assert patched.status_code == 200, patched.content
    body = api.get("/api/v1/injection/settings").json()
    assert body["problems"] == ["the long budget is a whole number of tokens from 0 to 32000"]
    assert body["settings"]["budgets"]["long"] == 500
    assert body["settings"]["slots"]["arcs"] == {"enabled": False, "depth": 7}
    assert body["integrity"] == patched.json()["integrity"] != integrity


# ------------------------------------------------------------------------------------------------- tenancy

ROUTES = [
    ("post", "/api/v1/chats/{chat}/context", {"message": ASK}),
    ("get", "/api/v1/chats/{chat}/context", None),
    ("get", "/api/v1/chats/{chat}/messages/1/recall", None),
    ("patch", "/api/v1/chats/{chat}/messages/1/recall", {"injection_text": "mine now"}),
    ("delete", "/api/v1/chats/{chat}/messages/1/recall", None),
    ("post", "/api/v1/chats/{chat}/messages/1/recall/rerun", None),
]


@pytest.mark.parametrize(("method", "url", "body"), ROUTES, ids=[f"{m} {u}" for m, u, _ in ROUTES])
def test_another_users_chat_is_not_found_and_left_alone(other_api, recalled, method, url, body):
    response = getattr(other_api, method)(
        url.format(chat=recalled.pk), body, format="json", **if_match(recalled.integrity)
    )
    assert response.status_code == 404, response.content
    assert stored(recalled)["injectionText"] == f"[Recalled for this turn]\n- {DOG}"
    assert fresh(recalled).integrity == recalled.integrity
    assert InjectionState.objects.get(chat=recalled).builds == 1


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [*ROUTES, ("get", "/api/v1/injection/settings", None)],
    ids=[f"{m} {u}" for m, u, _ in [*ROUTES, ("get", "/api/v1/injection/settings", None)]],
)
def test_an_anonymous_request_is_unauthorised(recalled, method, url, body):
    response = getattr(APIClient(), method)(
        url.format(chat=recalled.pk), body, format="json", **if_match(recalled.integrity)
    )
    assert response.status_code == 401
    assert fresh(recalled).integrity == recalled.integrity
