"""The lifecycle over the API: classified creation, batches as extraction passes, decisions, settings."""

import pytest

from apps.memories.models import Decision, Memory
from tests.lifecycle.helpers import SUPERSESSION, at_cosine, unit

pytestmark = pytest.mark.django_db
MEMORIES, SUBMIT = "/api/v1/memories/", "/api/v1/memories/submit"


def test_creating_a_duplicate_answers_200_with_the_re_confirmed_memory(api, character, scripted):
    scripted.vectors["Mira hums at work."] = unit(0)
    scripted.vectors["Mira hums while she works."] = at_cosine(0.95)
    first = api.post(
        MEMORIES, {"character": character.pk, "kind": "fact", "content": "Mira hums at work."}, format="json"
    )
    again = api.post(
        MEMORIES, {"character": character.pk, "kind": "fact", "content": "Mira hums while she works."}, format="json"
    )
    assert (first.status_code, again.status_code) == (201, 200)
    body = again.json()
    assert body["id"] == first.json()["id"] and body["confidence"] == pytest.approx(0.75)
    assert (body["decision"]["outcome"], body["decision"]["related"], body["decision"]["memory"]) == (
        "rejected",
        body["id"],
        None,
    )
    assert body["decision"]["similarity"] == pytest.approx(0.95, abs=1e-3)


def test_a_batch_is_classified_in_order_and_counts_as_one_extraction_pass(api, user, character, scripted, hosted_llm):
    scripted.vectors["Mira lives by the harbour."] = unit(0)
    scripted.vectors["Mira no longer lives by the harbour."] = at_cosine(0.7)
    scripted.vectors["Corvin is the lamplighter."] = unit(5)
    stale = api.post(MEMORIES, {"character": character.pk, "kind": "event", "content": "A storm."}, format="json")
    assert stale.status_code == 201
    response = api.post(
        SUBMIT,
        {
            "character": character.pk,
            "extraction_pass": True,
            "candidates": [
                {"kind": "fact", "content": "Mira lives by the harbour.", "source_message_indices": [1]},
                {"kind": "fact", "content": "Mira no longer lives by the harbour.", "source_message_indices": [9]},
                {"kind": "fact", "content": "Corvin is the lamplighter."},
                {"kind": "fact", "content": "Corvin is the lamplighter."},
            ],
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [r["outcome"] for r in body["results"]] == ["passed", "superseded", "passed", "rejected"]
    assert body["results"][1]["related"] == body["results"][0]["memory"]["id"]
    # The storm was not found again by this pass; the pass's own memories were.
    assert Memory.objects.get(pk=stale.json()["id"]).unconfirmed_count == 1
    assert body["decay"] == {"unconfirmed": 1, "retired": 0}
    assert hosted_llm.server.prompts(SUPERSESSION) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"candidates": [{"kind": "fact", "content": "x"}]}, "character"),
        ({"candidates": []}, "candidates"),
        ({"candidates": [{"kind": "message", "content": "x"}]}, "kind"),
        ({"candidates": [{"kind": "fact", "content": ""}]}, "content"),
        ({"candidates": [{"kind": "fact", "content": "ok"}, {"kind": "fact", "content": "\u0000"}]}, "content"),
    ],
)
def test_a_bad_batch_is_refused_naming_the_field_and_stores_nothing(api, character, body, field):
    if "character" not in field:
        body = {"character": character.pk, **body}
    response = api.post(SUBMIT, body, format="json")
    assert response.status_code == 400, response.content
    assert field in str(response.json())
    assert not Memory.objects.exists() and not Decision.objects.exists()


def test_decisions_explain_a_memory_and_are_private(api, other_api, character, scripted):
    scripted.vectors["Mira lives by the harbour."] = unit(0)
    scripted.vectors["Mira no longer lives by the harbour."] = at_cosine(0.7)
    old = api.post(
        MEMORIES, {"character": character.pk, "kind": "fact", "content": "Mira lives by the harbour."}, format="json"
    ).json()
    api.post(
        MEMORIES,
        {"character": character.pk, "kind": "fact", "content": "Mira no longer lives by the harbour."},
        format="json",
    )
    decisions = api.get(f"/api/v1/memories/{old['id']}/decisions").json()["results"]
    assert [d["outcome"] for d in decisions] == ["superseded", "passed"]
    assert decisions[0]["related"] == old["id"] and decisions[0]["scores"]["cue"] == "no longer"
    assert other_api.get(f"/api/v1/memories/{old['id']}/decisions").status_code == 404


def test_lifecycle_settings_take_an_iana_time_zone(api):
    assert api.get("/api/v1/memories/lifecycle/settings").json() == {"time_zone": "UTC", "hierarchy_enabled": True}
    # A name of no zone, and names of folders of zones (a 500 before: the zone database answered IsADirectoryError).
    for name in ("Mars/Olympus", "Europe", "America/Argentina", "../zoneinfo"):
        response = api.put("/api/v1/memories/lifecycle/settings", {"time_zone": name}, format="json")
        assert response.status_code == 400 and response.json()["extra"]["field"] == "time_zone", name
    assert api.get("/api/v1/memories/lifecycle/settings").json()["time_zone"] == "UTC"
    response = api.put("/api/v1/memories/lifecycle/settings", {"time_zone": "Asia/Kolkata"}, format="json")
    assert response.json()["time_zone"] == "Asia/Kolkata"


def test_consolidating_by_hand_needs_a_scope_and_a_deduplicated_kind(api, character, other_api):
    assert api.post("/api/v1/memories/consolidate", {"kind": "fact"}, format="json").status_code == 400
    response = api.post("/api/v1/memories/consolidate", {"character": character.pk, "kind": "daily"}, format="json")
    assert response.status_code == 400 and "kind" in response.json()
    theirs = other_api.post("/api/v1/memories/consolidate", {"character": character.pk, "kind": "fact"}, format="json")
    assert theirs.status_code == 404


def test_a_request_gives_the_model_one_try_and_keeps_the_candidate_when_it_fails(api, character, scripted, hosted_llm):
    from apps.llm.models import Call
    from tests.llm_server import Reply

    scripted.vectors["Mira hums at work."] = unit(0)
    scripted.vectors["Mira sings at the market."] = at_cosine(0.6)
    hosted_llm.server.on(SUPERSESSION, Reply(status=503))
    api.post(MEMORIES, {"character": character.pk, "kind": "fact", "content": "Mira hums at work."}, format="json")
    response = api.post(
        MEMORIES, {"character": character.pk, "kind": "fact", "content": "Mira sings at the market."}, format="json"
    )
    assert response.status_code == 201 and response.json()["decision"]["outcome"] == "uncertain"
    assert Call.objects.get(purpose="supersession").attempts == 1  # background work would have retried 3 times


def test_a_summary_with_a_malformed_period_is_refused_and_a_valid_one_normalised(api, character):
    bad = api.post(
        MEMORIES,
        {"character": character.pk, "kind": "weekly", "content": "A week.", "data": {"period": "last week"}},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["extra"]["field"] == "data" and "2026-W47" in bad.json()["message"]
    good = api.post(
        MEMORIES,
        {"character": character.pk, "kind": "weekly", "content": "A week.", "data": {"period": "2026-W7"}},
        format="json",
    )
    assert good.status_code == 201 and good.json()["data"]["period"] == "2026-W07"
    assert Memory.objects.count() == 1


def test_a_batch_stops_asking_the_model_when_the_requests_time_is_spent(
    api, character, scripted, hosted_llm, settings
):
    settings.LOREKEEPER_LIFECYCLE = {**settings.LOREKEEPER_LIFECYCLE, "interactive_budget": 0}
    scripted.vectors["Mira hums at work."] = unit(0)
    scripted.vectors["Mira sings at the market."] = at_cosine(0.6)
    body = {
        "character": character.pk,
        "candidates": [
            {"kind": "fact", "content": "Mira hums at work."},
            {"kind": "fact", "content": "Mira sings at the market."},
        ],
    }
    results = api.post(SUBMIT, body, format="json").json()["results"]
    assert [r["outcome"] for r in results] == ["passed", "uncertain"]
    assert "no time left in this request" in results[1]["decision"]["reason"]
    assert hosted_llm.server.requests == []
