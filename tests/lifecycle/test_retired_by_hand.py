"""A memory a person retired stays retired: extraction writing it again (the same text, or a paraphrase at a
duplicate's likeness) is refused and recorded, the retired one left as it was. What the lifecycle retired itself
(decayed, superseded, rolled back) may come back, and a person may write it again."""

import pytest

from apps.memories.models import Decision, Memory
from apps.memories.services.lifecycle.classify import Candidate
from apps.memories.services.memories import memory_retire
from tests.lifecycle.helpers import at_cosine, unit

pytestmark = pytest.mark.django_db

TAR = "Mira hates the smell of tar."


def _extracted(content: str) -> Candidate:
    return Candidate(kind="fact", content=content, source_message_indices=[30], origin="extraction")


def test_a_memory_retired_on_its_page_is_not_extracted_again(web, submit, scripted):
    [first] = submit(_extracted(TAR))
    response = web.post(f"/memories/{first.memory.pk}/retire/", {"reason": "wrong: Rowan hates tar"})
    assert response.status_code == 302
    retired = Memory.objects.values().get(pk=first.memory.pk)

    [again] = submit(_extracted(TAR))

    assert (again.outcome, again.memory, again.related.pk) == ("rejected", None, first.memory.pk)
    assert Memory.objects.filter(status="active").count() == 0
    assert Memory.objects.values().get(pk=first.memory.pk) == retired  # not reconfirmed, not restored
    decision = Decision.objects.get(outcome="rejected")
    assert decision.reason.startswith(f"like #{first.memory.pk}, which was retired by hand (wrong: Rowan hates tar")
    assert (decision.related_id, decision.method) == (first.memory.pk, "hash")


def test_a_paraphrase_of_a_retired_memory_is_refused_and_a_new_topic_is_not(submit, scripted):
    scripted.vectors[TAR] = unit(0)
    [first] = submit(_extracted(TAR))
    memory_retire(memory=first.memory, reason="deleted")  # as the API's DELETE and a synced deletion do
    scripted.vectors["The smell of tar is hateful to Mira."] = at_cosine(0.9)
    scripted.vectors["Mira keeps the lantern lit."] = at_cosine(0.3)

    [paraphrase] = submit(_extracted("The smell of tar is hateful to Mira."))
    [other] = submit(_extracted("Mira keeps the lantern lit."))

    assert (paraphrase.outcome, paraphrase.related.pk, paraphrase.decision.method) == (
        "rejected", first.memory.pk, "embedding"
    )  # fmt: skip
    assert other.outcome == "passed" and other.memory.content == "Mira keeps the lantern lit."


@pytest.mark.parametrize("reason", ["decayed", "rolled_back"])
def test_what_the_lifecycle_retired_may_be_extracted_again(submit, scripted, reason):
    [first] = submit(_extracted(TAR))
    memory_retire(memory=first.memory, reason=reason)
    [again] = submit(_extracted(TAR))
    assert again.outcome == "passed" and again.memory.status == "active"


def test_a_person_may_write_again_what_they_retired(submit, scripted):
    [first] = submit(_extracted(TAR))
    memory_retire(memory=first.memory, reason="retired by hand")
    [again] = submit(Candidate(kind="fact", content=TAR, origin="api"))
    assert again.outcome == "passed" and again.memory.content == TAR
