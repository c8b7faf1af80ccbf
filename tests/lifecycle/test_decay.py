"""Confidence decay: after 10 passes that do not find a memory again, its confidence falls 0.02 a pass down to 0.3,
and a memory at the floor is retired, kept with its history; being found again resets all that."""

import pytest

from apps.memories.models import Decision, Memory
from apps.memories.services.lifecycle.decay import memories_pass_end
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, ScopeKey
from tests.lifecycle.helpers import unit

pytestmark = pytest.mark.django_db


def _passes(scope, n: int, seen=()) -> None:
    for _ in range(n):
        memories_pass_end(scope=scope, kinds=LONG_TERM_KINDS, seen_ids=seen)


def test_ten_unconfirmed_passes_cost_nothing_the_eleventh_starts_the_decay(user, character, submit, scripted):
    [result] = submit(("fact", "Mira fears deep water."))
    scope = ScopeKey(user.pk, character.pk, None)
    _passes(scope, 10)
    memory = Memory.objects.get(pk=result.memory.pk)
    assert (memory.unconfirmed_count, memory.confidence) == (10, pytest.approx(0.7))
    _passes(scope, 1)
    memory.refresh_from_db()
    assert (memory.unconfirmed_count, memory.confidence) == (11, pytest.approx(0.68))


def test_a_memory_decays_to_the_floor_and_is_retired_there_with_a_recorded_reason(user, character, submit, scripted):
    [result] = submit(("fact", "Mira fears deep water."))
    scope = ScopeKey(user.pk, character.pk, None)
    _passes(scope, 29)  # 10 free passes, then 19 × 0.02: 0.32
    memory = Memory.objects.get(pk=result.memory.pk)
    assert (memory.status, memory.confidence) == ("active", pytest.approx(0.32))
    _passes(scope, 1)
    memory.refresh_from_db()
    assert (memory.status, memory.retired_reason, memory.confidence) == ("retired", "decayed", pytest.approx(0.3))
    decision = Decision.objects.get(memory=memory, outcome="decayed")
    assert decision.scores["unconfirmed_count"] == 30 and "30 passes" in decision.reason
    _passes(scope, 5)  # retired memories are left alone
    memory.refresh_from_db()
    assert memory.unconfirmed_count == 30


def test_being_extracted_again_resets_the_counter_and_raises_confidence(user, character, submit, scripted):
    scripted.vectors["Mira fears deep water."] = unit(0)
    [result] = submit(("fact", "Mira fears deep water."))
    scope = ScopeKey(user.pk, character.pk, None)
    _passes(scope, 15)
    [again] = submit(("fact", "Mira fears deep water."))
    assert again.outcome == "rejected"
    memory = Memory.objects.get(pk=result.memory.pk)
    assert (memory.unconfirmed_count, memory.confidence) == (0, pytest.approx(0.6 + 0.05))


def test_memories_seen_by_the_pass_other_kinds_and_other_scopes_do_not_count(
    user, character, mira_chat, submit, scripted
):
    [seen], [other_kind] = submit(("fact", "Seen.")), submit(("scene", "A scene."))
    [in_chat] = submit(("fact", "In the chat."), chat=mira_chat)
    _passes(ScopeKey(user.pk, character.pk, None), 3, seen=[seen.memory.pk])
    counts = dict(
        Memory.objects.filter(pk__in=[seen.memory.pk, other_kind.memory.pk, in_chat.memory.pk]).values_list(
            "pk", "unconfirmed_count"
        )
    )
    assert counts == {seen.memory.pk: 0, other_kind.memory.pk: 0, in_chat.memory.pk: 0}
