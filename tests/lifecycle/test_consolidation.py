"""Consolidation: when a kind's counter reaches its threshold, a task asks the model to merge near-duplicates into
fewer, richer memories and retires the merged ones via supersession."""

import json

import pytest
from django.db import connection

from apps.memories.models import ConsolidationCounter, Decision, LifecycleJob, Memory
from apps.memories.services.lifecycle.consolidation import consolidation_run
from apps.memories.services.lifecycle.scope import ScopeKey
from tests.chats.factories import CharacterFactory
from tests.lifecycle.helpers import unit
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db
CONSOLIDATION = "Memories of kind"


def _distinct(scripted, texts):
    for axis, text in enumerate(texts):
        scripted.vectors[text] = unit(axis)
    return texts


def test_the_fourth_new_fact_triggers_a_merge_that_supersedes_the_merged_ones(
    user, character, submit, scripted, hosted_llm, django_capture_on_commit_callbacks
):
    texts = _distinct(scripted, ["Mira likes tea.", "Mira drinks tea each morning.", "Corvin is old.", "Rain."])
    merged = "Mira drinks tea every morning and likes it."
    hosted_llm.server.on(CONSOLIDATION, json.dumps({"merges": [{"ids": [1, 2], "content": merged, "importance": 3}]}))
    with django_capture_on_commit_callbacks(execute=True):
        results = [submit(("fact", t))[0] for t in texts[:3]]
    assert LifecycleJob.objects.count() == 0 and not hosted_llm.server.prompts(CONSOLIDATION)
    with django_capture_on_commit_callbacks(execute=True):
        results += submit(("fact", texts[3]))

    job = LifecycleJob.objects.get()
    assert (job.type, job.state, job.params["kind"], job.result["created"], job.result["merged"]) == (
        "consolidation",
        "done",
        "fact",
        1,
        2,
    )
    [prompt] = hosted_llm.server.prompts(CONSOLIDATION)
    assert "[1] Mira likes tea." in prompt and "[4] Rain." in prompt
    new = Memory.objects.get(content=merged)
    assert (new.kind, new.status, new.importance) == ("fact", "active", 3)
    for result in results[:2]:
        old = Memory.objects.get(pk=result.memory.pk)
        assert (old.status, old.retired_reason, old.superseded_by_id) == ("retired", "consolidated", new.pk)
    assert sorted(new.supersedes.values_list("pk", flat=True)) == sorted(r.memory.pk for r in results[:2])
    assert Decision.objects.filter(memory=new, outcome="consolidated").count() == 2
    assert ConsolidationCounter.objects.get(kind="fact").count == 0
    assert new.embedding_model == "openai:scripted"


def test_counters_are_independent_per_kind(
    user, character, submit, scripted, hosted_llm, django_capture_on_commit_callbacks
):
    texts = _distinct(scripted, ["A.", "B.", "C.", "D.", "E.", "F."])
    with django_capture_on_commit_callbacks(execute=True):
        for kind, text in zip(["fact", "fact", "fact", "event", "event", "event"], texts, strict=True):
            submit((kind, text))
    counts = dict(ConsolidationCounter.objects.values_list("kind", "count"))
    assert counts == {"fact": 3, "event": 3}  # fact needs 4, event 4: no pass yet
    assert not LifecycleJob.objects.exists()


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! I merged them.",
        '{"merges": [{"ids": [1], "content": "only one"}]}',
        '{"merges": [{"ids": [1, 9], "content": "out of range"}]}',
        '{"merges": [{"ids": [1, 2], "content": "x"}, {"ids": [2, 3], "content": "twice"}]}',
        '{"merges": ' + "[" * 5_000 + "]" * 5_000 + "}",  # nested past what the parser follows
    ],
)
def test_an_unreadable_merge_answer_fails_the_job_and_changes_nothing(
    user, character, submit, scripted, hosted_llm, answer
):
    texts = _distinct(scripted, ["A fact.", "Another fact.", "A third."])
    made = [submit(("fact", t))[0].memory.pk for t in texts]
    hosted_llm.server.on(CONSOLIDATION, answer)
    from apps.llm.client import LlmError

    with pytest.raises(LlmError) as caught:
        consolidation_run(scope=ScopeKey(user.pk, character.pk, None), kind="fact", connection=hosted_llm)
    assert caught.value.call is not None and caught.value.call.status == "ok"
    assert set(Memory.objects.filter(pk__in=made).values_list("status", flat=True)) == {"active"}
    assert Memory.objects.filter(kind="fact").count() == 3


def test_a_failed_pass_is_left_visibly_failed_on_its_job(
    user, character, submit, scripted, hosted_llm, api, django_capture_on_commit_callbacks
):
    texts = _distinct(scripted, ["A fact.", "Another fact."])
    for text in texts:
        submit(("fact", text))
    hosted_llm.server.on(CONSOLIDATION, Reply(status=500))
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/v1/memories/consolidate", {"character": character.pk, "kind": "fact"}, format="json")
    assert response.status_code == 202, response.content
    job = LifecycleJob.objects.get(pk=response.json()["id"])
    assert job.state == "failed" and "server error 500" in job.error and "call #" in job.error


@pytest.mark.django_db(transaction=True)  # the edit comes from the model server's thread, another connection
def test_a_merge_skips_a_memory_edited_while_the_model_was_thinking(user, character, submit, scripted, hosted_llm):
    texts = _distinct(scripted, ["Tea.", "More tea."])
    made = [submit(("fact", t))[0].memory.pk for t in texts]

    def edit_then_answer(prompt):
        Memory.objects.filter(pk=made[0]).update(version=5)  # another writer, mid-call
        connection.close()  # this thread's own connection, or the test database could not be dropped
        return Reply(json.dumps({"merges": [{"ids": [1, 2], "content": "Tea, always."}]}))

    hosted_llm.server.on(CONSOLIDATION, edit_then_answer)
    result = consolidation_run(scope=ScopeKey(user.pk, character.pk, None), kind="fact", connection=hosted_llm)
    assert result["created"] == 0 and not Memory.objects.filter(content="Tea, always.").exists()


def test_only_the_scope_and_kind_are_offered_to_the_model(user, character, submit, scripted, hosted_llm):
    _distinct(scripted, ["Mine.", "Also mine.", "Elsewhere.", "An event."])
    submit(("fact", "Mine.")), submit(("fact", "Also mine.")), submit(("event", "An event."))
    submit(("fact", "Elsewhere."), character=CharacterFactory(user=user))
    hosted_llm.server.on(CONSOLIDATION, '{"merges": []}')
    consolidation_run(scope=ScopeKey(user.pk, character.pk, None), kind="fact", connection=hosted_llm)
    [prompt] = hosted_llm.server.prompts(CONSOLIDATION)
    assert "Mine." in prompt and "Also mine." in prompt and "Elsewhere." not in prompt and "An event." not in prompt
