"""The extraction model test: three fixed scenarios through every tier against a connection, showing the raw
answers, what parsed and hints on the quality, and writing no memory."""

import pytest

from apps.extraction.models import ModelTest
from apps.extraction.services.model_test import ORDER, model_test_run, scenario
from apps.memories.models import Memory
from tests.extraction.helpers import TASKS
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

TIERS = [
    "compaction",
    "session",
    "longterm",
    "arcs",
    "ledger",
    "scene_recap",
    "epistemic",
    "profiles",
    "canon",
    "continuity",
]


def run(model, user) -> ModelTest:
    test = ModelTest.objects.create(user=user, connection=model, model=model.model, profile="B")
    return model_test_run(test_id=test.pk)


def test_every_scenario_runs_through_every_tier_and_nothing_is_written(model, user):
    test = run(model, user)
    assert test.state == "done"
    assert [block["scenario"] for block in test.results] == list(ORDER)
    for block in test.results:
        assert [entry["tier"] for entry in block["tiers"]] == TIERS
        assert all(entry["hints"] and entry["raw"] for entry in block["tiers"])
    assert not Memory.objects.filter(user=user).exists()
    investigation = {entry["tier"]: entry for entry in test.results[0]["tiers"]}
    assert investigation["session"]["parsed"] == [
        "[revelation:3:session] The harbour seal on the ledger is a forgery. (Corvin)",
        "[detail:2:scene] Rowan pocketed a brass key from the ledger desk. (brass key)",
    ]
    assert investigation["session"]["prompt"] == "session@v1"
    # The story script knows nothing of the scenario: the hints say what it missed.
    assert any(h.startswith("warning: expected mention of") for h in investigation["longterm"]["hints"])


def test_the_hints_tell_format_drift_leaked_thinking_and_a_missed_contradiction(model, user):
    model.server.on(TASKS["session"], "Here are some memories:\n[detail:2:scene] Wax on the ledger.\nsomething else")
    model.server.on(TASKS["ledger"], Reply("[state:Sable:character] mood=tense", reasoning="Let me think first."))
    model.server.on(TASKS["continuity"], "OK")
    test = run(model, user)
    healer = {entry["tier"]: entry for entry in test.results[1]["tiers"]}
    assert healer["session"]["unparsed"] == ["Here are some memories:", "something else"]
    assert "warning: 2 of 3 lines did not follow the format" in healer["session"]["hints"]
    assert "info: 19 characters of thinking were stripped before parsing" in healer["ledger"]["hints"]
    assert scenario("healer")["expect"]["continuity"]["contradiction"] is True
    assert "warning: the reply contradicts the story, and the model answered OK" in healer["continuity"]["hints"]


def test_a_failing_connection_is_shown_per_tier_not_as_a_crash(model, user):
    model.server.on(lambda prompt: True, Reply(status=400))
    test = run(model, user)
    assert test.state == "done"
    entry = test.results[0]["tiers"][0]
    assert entry["error"].startswith("the server refused the request (400)")
    assert entry["hints"] == [f"error: the call failed: {entry['error']}"]


def test_a_removed_connection_fails_the_test(model, user):
    test = ModelTest.objects.create(user=user, connection=None, model="gone")
    assert model_test_run(test_id=test.pk).state == "failed"
