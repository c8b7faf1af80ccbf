"""Every candidate is classified against the same owner's, scope's and kind's memories, and every decision is kept
with its scores: duplicates re-confirm, changes supersede with history, conflicts are linked, never deleted."""

import pytest

from apps.llm.services import connection_update
from apps.memories.models import Decision, Memory, Status
from apps.memories.selectors import memory_history
from apps.memories.services.lifecycle.classify import Candidate
from apps.memories.services.settings import embedding_settings_set
from tests.chats.factories import CharacterFactory
from tests.lifecycle.helpers import SUPERSESSION, at_cosine, unit
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

OLD = "Mira lives in the harbour district."


def _vector(scripted, text: str, vector: list[float]) -> str:
    scripted.vectors[text] = vector
    return text


def test_a_paraphrase_is_rejected_and_re_confirms_the_existing_memory(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira's home is down in the harbour quarter.", at_cosine(0.9))
    [first] = submit(("fact", OLD))
    Memory.objects.filter(pk=first.memory.pk).update(unconfirmed_count=7, confidence=0.6)

    [second] = submit(Candidate(kind="fact", content=new, source_message_indices=[12]))

    assert (second.outcome, second.memory, second.related.pk) == ("rejected", None, first.memory.pk)
    again = Memory.objects.get(pk=first.memory.pk)
    assert (again.unconfirmed_count, round(again.confidence, 2), again.status) == (0, 0.65, "active")
    assert again.source_message_indices == [12]
    assert Memory.objects.filter(kind="fact").count() == 1
    decision = Decision.objects.get(outcome="rejected")
    assert (decision.content, decision.related_id, decision.method) == (new, first.memory.pk, "embedding")
    assert decision.similarity == pytest.approx(0.9, abs=1e-3)
    assert decision.scores["profile"] == "B" and decision.scores["thresholds"]["embedding.duplicate"] == 0.85
    assert hosted_llm.server.prompts(SUPERSESSION) == []


def test_the_same_text_again_is_rejected_by_its_hash(submit, scripted):
    [first] = submit(("fact", OLD))
    [second] = submit(("fact", "  " + OLD + " "))
    assert (second.outcome, second.related.pk, second.decision.method) == ("rejected", first.memory.pk, "hash")


def test_a_state_change_supersedes_without_asking_the_model(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira no longer lives in the harbour district; she moved to the citadel.", at_cosine(0.7))
    [first] = submit(Candidate(kind="fact", content=OLD, source_message_indices=[3]))
    [second] = submit(Candidate(kind="fact", content=new, source_message_indices=[40, 41]))

    assert second.outcome == "superseded"
    old = Memory.objects.get(pk=first.memory.pk)
    assert (old.status, old.retired_reason, old.superseded_by_id) == ("retired", "superseded", second.memory.pk)
    assert (old.valid_from, old.valid_to, second.memory.valid_from) == (3, 40, 40)
    assert second.decision.scores["cue"] == "no longer"
    assert hosted_llm.server.prompts(SUPERSESSION) == []


def test_a_near_duplicate_with_new_state_wording_is_a_change_not_a_duplicate(submit, scripted):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira no longer lives in the harbour district.", at_cosine(0.95))
    [first] = submit(("fact", OLD))
    [second] = submit(("fact", new))
    assert second.outcome == "superseded" and Memory.objects.get(pk=first.memory.pk).status == "retired"


def test_same_topic_without_a_cue_asks_the_model_and_update_supersedes(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira rents a room above the citadel bakery.", at_cosine(0.6))
    hosted_llm.server.on(SUPERSESSION, Reply("<think>Same person, new home: a later state.</think>\nUPDATE"))
    [first] = submit(("fact", OLD))
    [second] = submit(("fact", new))

    assert second.outcome == "superseded"
    assert Memory.objects.get(pk=first.memory.pk).superseded_by_id == second.memory.pk
    [prompt] = hosted_llm.server.prompts(SUPERSESSION)
    assert OLD in prompt and new in prompt
    call = second.decision.llm_call
    assert (call.template, call.response, call.reasoning) == (
        "supersession@v2",
        "UPDATE",
        "Same person, new home: a later state.",
    )
    assert second.decision.scores["model_answer"] == "update"


def test_the_model_saying_independent_keeps_both_as_uncertain(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira's harbour district flat has a blue door.", at_cosine(0.6))
    hosted_llm.server.on(SUPERSESSION, Reply("INDEPENDENT", reasoning="Both hold."))
    [first], [second] = submit(("fact", OLD)), submit(("fact", new))
    assert (second.outcome, second.related.pk) == ("uncertain", first.memory.pk)
    assert set(Memory.objects.filter(kind="fact").values_list("status", flat=True)) == {"active"}


def test_a_contradiction_is_linked_and_neither_memory_is_deleted(submit, scripted, hosted_llm):
    old = _vector(scripted, "Mira's eyes are green.", unit(0))
    new = _vector(scripted, "Mira's eyes are brown.", at_cosine(0.8))
    hosted_llm.server.on(SUPERSESSION, "CONTRADICTS")
    [first], [second] = submit(("fact", old)), submit(("fact", new))
    assert second.outcome == "contradiction"
    assert list(second.memory.contradicts.values_list("pk", flat=True)) == [first.memory.pk]
    assert list(Memory.objects.get(pk=first.memory.pk).contradicts.values_list("pk", flat=True)) == [second.memory.pk]
    assert Memory.objects.filter(kind="fact", status="active").count() == 2


def test_an_unrelated_memory_passes(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "The lighthouse keeper collects brass buttons.", unit(3))
    [_], [second] = submit(("fact", OLD)), submit(("fact", new))
    assert (second.outcome, second.memory.status) == ("passed", "active")
    assert second.decision.scores["same_kind"] == pytest.approx(0.0, abs=1e-6)
    assert hosted_llm.server.requests == []


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(status=500), "server error 500"),
        (Reply("Let me think about the weather instead."), "unreadable answer"),
        (Reply(raw="{not json"), "unreadable answer"),
    ],
)
def test_a_failing_or_rambling_model_keeps_both_and_records_why(submit, scripted, hosted_llm, reply, error):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira's rooms face the harbour.", at_cosine(0.6))
    hosted_llm.server.on(SUPERSESSION, reply)
    [first], [second] = submit(("fact", OLD)), submit(("fact", new))
    assert (second.outcome, Memory.objects.get(pk=first.memory.pk).status) == ("uncertain", "active")
    assert error in second.decision.scores["model_error"]
    assert "no answer" in second.decision.reason


def test_without_a_model_connection_same_topic_is_kept_as_uncertain(submit, scripted):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira's rooms face the harbour.", at_cosine(0.6))
    [_], [second] = submit(("fact", OLD)), submit(("fact", new))
    assert second.outcome == "uncertain" and "no model connection" in second.decision.reason


def test_another_kind_is_a_duplicate_only_above_the_cross_type_threshold(submit, scripted, hosted_llm):
    _vector(scripted, "Mira fought the harbour fire.", unit(0))
    close = _vector(scripted, "Mira fought a fire at the harbour.", at_cosine(0.93))
    nearer_than_duplicate = _vector(scripted, "Mira once fought a harbour fire.", at_cosine(0.88))
    [event] = submit(("event", "Mira fought the harbour fire."))
    [rejected] = submit(("fact", close))
    [kept] = submit(("fact", nearer_than_duplicate))
    assert (rejected.outcome, rejected.related.pk) == ("rejected", event.memory.pk)
    assert "cross-type" in rejected.decision.reason and rejected.decision.scores["cross_type"] == pytest.approx(0.93)
    assert kept.outcome == "passed"  # 0.88 < 0.91 (profile B cross-type), and no fact on the topic yet


def test_profile_a_uses_its_looser_duplicate_threshold(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Mira stays in the harbour district.", at_cosine(0.83))
    hosted_llm.server.on(SUPERSESSION, "INDEPENDENT")
    [_], [as_b] = submit(("fact", OLD)), submit(("fact", new))
    assert as_b.outcome == "uncertain"  # 0.83 < 0.85
    Memory.objects.filter(pk=as_b.memory.pk).delete()
    connection_update(connection=hosted_llm, data={"profile": "A"})
    [as_a] = submit(("fact", new))
    assert (as_a.outcome, as_a.decision.scores["profile"]) == ("rejected", "A")  # 0.83 >= 0.82


def test_without_embeddings_word_overlap_decides(user, submit, scripted, hosted_llm):
    embedding_settings_set(user=user, provider="none")
    hosted_llm.server.on(SUPERSESSION, "INDEPENDENT")
    [first] = submit(("fact", "Corvin keeps the tower matches in his left boot."))
    [duplicate] = submit(("fact", "Corvin keeps the tower matches in his boot."))
    [unrelated] = submit(("fact", "The bakery opens at dawn."))
    assert (duplicate.outcome, duplicate.decision.method, duplicate.related.pk) == (
        "rejected",
        "jaccard",
        first.memory.pk,
    )
    assert duplicate.decision.similarity == pytest.approx(5 / 6)
    assert unrelated.outcome == "passed" and unrelated.memory.embedding is None
    assert scripted.requests == []


def test_memories_without_a_current_vector_are_still_compared_by_words(user, submit, scripted):
    [first] = submit(("fact", "Corvin keeps the tower matches in his left boot."))
    Memory.objects.filter(pk=first.memory.pk).update(embedding=None, embedding_model="", embedding_dim=None)
    [second] = submit(("fact", "Corvin keeps the tower matches in his boot."))
    assert (second.outcome, second.decision.method) == ("rejected", "jaccard")


def test_other_scopes_and_other_users_are_never_compared(user, other_user, submit, scripted, mira_chat):
    submit(("fact", OLD))
    [in_other_character] = submit(("fact", OLD), character=CharacterFactory(user=user))
    [in_a_chat] = submit(("detail", OLD), chat=mira_chat)
    theirs = CharacterFactory(user=other_user)
    from apps.memories.services.lifecycle.classify import memories_submit

    [other_users] = memories_submit(user=other_user, candidates=[Candidate("fact", OLD)], character=theirs)
    assert [r.outcome for r in (in_other_character, in_a_chat, other_users)] == ["passed"] * 3


def test_a_chain_of_changes_keeps_its_history_in_order(submit, scripted):
    texts = [
        _vector(scripted, "Mira works at the docks.", unit(0)),
        _vector(scripted, "Mira no longer works at the docks; she became a courier.", at_cosine(0.7)),
        # cosine 0.6 to the second (same topic), 0 to the first (already retired)
        _vector(scripted, "Mira quit the courier job and now runs the bakery.", [0.0, 0.84, 0.5426] + [0.0] * 13),
    ]
    results = [
        submit(Candidate(kind="fact", content=t, source_message_indices=[i * 10]))[0] for i, t in enumerate(texts)
    ]
    assert [r.outcome for r in results] == ["passed", "superseded", "superseded"]
    chain = memory_history(memory=Memory.objects.get(pk=results[1].memory.pk))
    assert [m.content for m in chain] == texts
    assert [m.status for m in chain] == [Status.RETIRED, Status.RETIRED, Status.ACTIVE]
    assert [(m.valid_from, m.valid_to) for m in chain] == [(0, 10), (10, 20), (20, None)]
    assert [m.superseded_by_id for m in chain] == [chain[1].pk, chain[2].pk, None]


def test_summaries_are_not_deduplicated(submit, scripted):
    [first], [second] = submit(("canon", "The story so far.")), submit(("canon", "The story so far."))
    assert (first.outcome, second.outcome) == ("passed", "passed")
    assert "not deduplicated" in second.decision.reason


def test_the_model_can_call_a_paraphrase_below_the_threshold_a_duplicate(submit, scripted, hosted_llm):
    _vector(scripted, OLD, unit(0))
    new = _vector(scripted, "Home for Mira is the harbour district.", at_cosine(0.7))
    hosted_llm.server.on(SUPERSESSION, "DUPLICATE")
    [first], [second] = submit(("fact", OLD)), submit(("fact", new))
    assert (second.outcome, second.memory, second.related.pk) == ("rejected", None, first.memory.pk)
    assert "DUPLICATE" in second.decision.reason and Memory.objects.filter(kind="fact").count() == 1
