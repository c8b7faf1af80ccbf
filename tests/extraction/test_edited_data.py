"""The tiers read the `data` of the memories they wrote before, and a person may have rewritten it since (REST,
sync, the admin) in any JSON shape: the next pass goes on as if the field were missing, and nothing fails."""

import pytest

from apps.chats.services.messages import message_update
from apps.extraction.models import ChatPipeline, PipelineJob
from apps.extraction.services.pipeline import pipeline_rebuild
from apps.extraction.services.runner import chat_run
from apps.extraction.services.settings import extraction_settings_set
from apps.memories.models import Memory
from tests.extraction.helpers import TASKS, add_turns, process

pytestmark = pytest.mark.django_db


def rewrite(api, memory: Memory, **data) -> None:
    response = api.patch(f"/api/v1/memories/{memory.pk}/", {"data": {**memory.data, **data}}, format="json")
    assert response.status_code == 200, response.content


def failures(chat) -> list[tuple[str, str]]:
    return list(PipelineJob.objects.filter(chat=chat, state="failed").values_list("tier", "error"))


def active(chat, kind: str, **filters) -> Memory:
    return Memory.objects.filter(user=chat.user, kind=kind, status="active", origin="extraction", **filters).get()


def test_a_state_whose_fields_a_person_made_a_list_is_merged_as_empty(api, model, story):
    add_turns(story, 10)
    process(story)
    rewrite(api, active(story, "state", data__key="rowan"), fields=["location", "harbour"], entity=["Rowan"])
    model.server.on(TASKS["ledger"], "[state:Rowan:character] location=warehouse")
    add_turns(story, 10)
    process(story)

    assert failures(story) == []
    assert active(story, "state", data__key="rowan").data["fields"] == {"location": "warehouse"}
    assert "[state:?:character]" in model.server.prompts(TASKS["ledger"])[-1]  # the entity no name: "?"


@pytest.mark.parametrize("descriptors", [5, [["wary", "medium"], 3, None]])
def test_a_relationship_whose_descriptors_a_person_rewrote_gets_a_new_reading(api, model, story, descriptors):
    add_turns(story, 10)
    process(story)
    rewrite(api, active(story, "relationship"), descriptors=descriptors)
    add_turns(story, 10)
    process(story)

    assert failures(story) == []
    reading = active(story, "relationship")
    assert reading.data["descriptors"] == [["wary", "medium"], ["curious", "high"]]
    assert reading.supersedes.get().data["descriptors"] == descriptors


def test_profiles_whose_section_a_person_made_a_list_are_built_again(api, model, story, user):
    extraction_settings_set(user=user, data={"profile_every": 20})
    add_turns(story, 20)
    process(story)
    rewrite(api, active(story, "profile", data__section="world_state"), section=["world_state"])
    add_turns(story, 20)
    process(story)

    assert failures(story) == []
    sections = Memory.objects.filter(chat=story, kind="profile", status="active").values_list("data__section")
    # The edited one is no section the tier knows: it stays, a person's own, beside the one built again.
    assert sorted(s for (s,) in sections if isinstance(s, str)) == [
        "character_state",
        "relationship_matrix",
        "world_state",
    ]


LONG = "The rain kept falling on the harbour while they argued about the ledger and the seal. " * 3


def test_a_summary_whose_counts_a_person_rewrote_is_extended_and_rolled_back(api, model, story, user):
    extraction_settings_set(user=user, data={"context_tokens": 1024, "compaction_share": 0.5})
    add_turns(story, 30, text=lambda i: f"{LONG}({i})")
    model.server.on(TASKS["summary"], "Part one.")
    process(story)
    rewrite(api, active(story, "summary"), parts="one", summary_end="twenty")
    model.server.on(TASKS["summary"], "Part two.")
    add_turns(story, 20, text=lambda i: f"{LONG}({i})")
    process(story)
    two = active(story, "summary")
    assert failures(story) == [] and two.content == "Part one.\n\nPart two." and two.data["parts"] == 2

    rewrite(api, two, summary_end=[two.data["summary_end"]])
    message_update(chat=story, index=2, data={"mes": "A different beginning."})
    pipeline_rebuild(chat=story, from_index=2)
    chat_run(chat_id=story.pk)

    # Its end unreadable, the summary counts as ending at #0: nothing to take back, and the rebuild runs through.
    assert failures(story) == [] and ChatPipeline.objects.get(chat=story).stale_from is None


@pytest.mark.parametrize("fields", [{"items": 5}, {"items": "ab", "location": "quay"}])
def test_the_story_page_shows_state_fields_and_threads_of_any_shape(api, web, model, story, fields):
    add_turns(story, 10)
    process(story)
    model.server.on(TASKS["arcs"], "[resolved:1] Corvin confessed to forging the seal.")
    add_turns(story, 10)
    process(story)
    rewrite(api, active(story, "state", data__key="rowan"), fields=fields)
    rewrite(api, active(story, "arc", data__status="resolved"), thread=["not", "text"])

    response = web.get(f"/chats/{story.pk}/story/")

    assert response.status_code == 200
    page = response.content.decode()
    # A field named "items" is a field like any other, not the method of the same name.
    assert "<dt>items</dt><dd>" + str(fields["items"]) + "</dd>" in page
