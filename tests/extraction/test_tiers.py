"""Each tier against the scripted model: what it writes, where, and through which lifecycle path."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.extraction.models import ChatPipeline, ContinuityCheck, PipelineJob, Recap, Scene
from apps.extraction.services.pipeline import chat_opened
from apps.extraction.services.runner import chat_run
from apps.extraction.services.settings import extraction_settings_set
from apps.memories.models import Decision, Entity, Memory, Status
from apps.memories.services.schema import chat_schema_ensure
from tests.chats.factories import CharacterFactory
from tests.extraction.helpers import STORY, TASKS, add_turns, process

pytestmark = pytest.mark.django_db


def memories(user, **filters):
    return Memory.objects.filter(user=user, origin="extraction", **filters).exclude(kind="message")


def tiers_done(chat) -> set[str]:
    return set(PipelineJob.objects.filter(chat=chat, state="done").values_list("tier", flat=True))


def test_batch_extraction_stores_each_tier_in_its_scope_through_the_lifecycle(model, story, character, user):
    add_turns(story, 10)
    process(story)

    assert {"session", "longterm", "arcs", "ledger"} <= tiers_done(story)
    session = memories(user, chat=story, kind__in=["revelation", "detail"])
    assert sorted(m.content for m in session) == [
        "Rowan pocketed a brass key from the ledger desk.",
        "The harbour seal on the ledger is a forgery.",
    ]
    assert all(m.source_message_indices == list(range(10)) for m in session)
    fact = memories(user, kind="fact").get()
    assert (fact.character_id, fact.chat_id, fact.source_chat_id) == (character.pk, None, story.pk)
    assert [e.name for e in fact.entities.all()] == ["Mira"]
    relation = memories(user, kind="relationship").get()
    assert relation.data["descriptors"] == [["wary", "medium"], ["curious", "high"]]
    assert memories(user, kind="arc").get().data == {"status": "open", "persistent": False}
    ledger = {m.data["entity"]: m.data["fields"] for m in memories(user, kind="state")}
    assert ledger == {
        "Rowan": {"location": "harbour office", "carried_items": "brass key"},
        "brass key": {"owner": "Rowan", "condition": "tarnished"},
    }
    assert Entity.objects.filter(user=user, name="brass key", type="object").exists()
    # Every candidate went through classification: a decision each, with its scores.
    assert Decision.objects.filter(user=user, memory__in=session, outcome="passed").count() == 2
    pipeline = ChatPipeline.objects.get(chat=story)
    assert all(pipeline.through[tier] == 10 for tier in ("session", "longterm", "arcs", "ledger"))


def test_batch_extraction_waits_for_batch_every_messages(model, story, user):
    add_turns(story, 9)
    process(story)
    assert not tiers_done(story) & {"session", "longterm", "arcs", "ledger"}
    add_turns(story, 1)
    process(story)
    assert {"session", "longterm", "arcs", "ledger"} <= tiers_done(story)


@pytest.mark.parametrize(("profile", "kept"), [("A", 2), ("B", 4)])
def test_caps_per_pass_follow_the_hardware_profile(model, story, user, profile, kept):
    model.profile = profile
    model.save(update_fields=["profile"])
    secrets = [
        "Corvin keeps two ledgers under the floorboards.",
        "The harbourmaster owes the guild four hundred crowns.",
        "Old Tessa saw a lantern burning in the customs tower at midnight.",
        "The brass key opens the sea gate, not the office.",
        "Rowan's brother signed on with the smugglers last winter.",
        "The bishop's seal was melted down in a baker's oven.",
    ]
    lines = "\n".join(f"[revelation:{1 + i % 3}:session] {text}" for i, text in enumerate(secrets))
    model.server.on(TASKS["session"], lines)
    add_turns(story, 10)
    process(story)
    assert memories(user, kind="revelation").count() == kept
    job = PipelineJob.objects.get(chat=story, tier="session")
    assert job.result["over_cap"] == 6 - kept
    assert min(memories(user, kind="revelation").values_list("importance", flat=True)) >= (3 if kept == 2 else 2)


def test_relationship_history_is_a_chain_of_readings(model, story, user):
    add_turns(story, 10)
    process(story)
    model.server.on(TASKS["longterm"], "[rel] Mira -> Rowan: wary(medium), curious(high)", times=1)
    add_turns(story, 10)
    process(story)  # the same reading: re-confirmed, not stored twice
    assert memories(user, kind="relationship").count() == 1
    model.server.on(TASKS["longterm"], "[rel] mira -> rowan: fond(high)")
    add_turns(story, 10)
    process(story)
    chain = list(memories(user, kind="relationship").order_by("id"))
    assert [m.status for m in chain] == ["retired", "active"]
    assert chain[0].superseded_by_id == chain[1].pk
    assert chain[1].content == "mira → rowan: fond (high)"  # as the model wrote it; the pair matches in any case


def test_the_ledger_merges_changed_fields_and_keeps_the_history(model, story, user):
    add_turns(story, 10)
    process(story)
    model.server.on(TASKS["ledger"], "[state:Rowan:character] location=warehouse | carried_items=none | mood=wary")
    add_turns(story, 10)
    process(story)
    rowan = memories(user, kind="state", status="active", data__key="rowan").get()
    assert rowan.data["fields"] == {"location": "warehouse", "mood": "wary"}  # "none" cleared carried_items
    old = rowan.supersedes.get()
    assert old.data["fields"]["location"] == "harbour office" and old.status == Status.RETIRED
    decision = Decision.objects.get(memory=rowan)
    assert decision.outcome == "superseded" and "carried_items, location, mood" in decision.reason


def test_a_resolved_arc_supersedes_the_open_one_and_makes_canon_due_on_profile_b(model, story, user):
    add_turns(story, 10)
    process(story)
    model.server.on(TASKS["arcs"], "[resolved:1] Corvin confessed to forging the seal.")
    model.server.on(TASKS["canon"], "Mira of Hollin unmasked Corvin, the forger of the harbour seal.")
    add_turns(story, 10)
    process(story)
    resolved = memories(user, kind="arc", status="active").get()
    assert resolved.data["status"] == "resolved" and resolved.content == "Corvin confessed to forging the seal."
    assert resolved.supersedes.get().content == "Find out who forged the harbour seal."
    canon = memories(user, kind="canon").get()
    assert canon.character_id == story.characters.get().pk
    assert "forger" in canon.content
    assert ChatPipeline.objects.get(chat=story).canon_due is False
    prompt = model.server.prompts(TASKS["canon"])[0]
    assert "Resolved arcs:\n- Corvin confessed to forging the seal." in prompt
    assert "- Mira was born in the drowned village of Hollin." in prompt  # importance 3: in the canon
    assert "wary (medium)" not in prompt  # relationship history is not canon material


def test_canon_waits_for_a_person_on_a_local_model(model, story, user):
    model.profile = "A"
    model.save(update_fields=["profile"])
    add_turns(story, 10)
    process(story)
    model.server.on(TASKS["arcs"], "[resolved:1] Corvin confessed.")
    add_turns(story, 10)
    process(story)
    assert ChatPipeline.objects.get(chat=story).canon_due is True
    assert not memories(user, kind="canon").exists()
    assert not model.server.prompts(TASKS["canon"])


def test_compaction_extends_the_summary_and_never_rewrites_it(model, story, user):
    extraction_settings_set(user=user, data={"context_tokens": 1024, "compaction_share": 0.5})
    long = "The rain kept falling on the harbour while they argued about the ledger and the seal. " * 3
    add_turns(story, 30, text=lambda i: f"{long}({i})")
    model.server.on(TASKS["summary"], "First they found the ledger.")
    process(story)
    first = Memory.objects.get(chat=story, kind="summary")
    end = ChatPipeline.objects.get(chat=story).summary_end
    # The newest messages stay out of the summary: what is left fits in half the share of the context.
    assert first.content == "First they found the ledger." and first.data["summary_end"] == end
    assert 20 < end < 30

    model.server.on(TASKS["summary"], "Then they followed the trail.")
    add_turns(story, 20, text=lambda i: f"{long}({i})")
    process(story)
    first.refresh_from_db()
    last = Memory.objects.get(chat=story, kind="summary", status="active")
    assert last.content == "First they found the ledger.\n\nThen they followed the trail."
    assert (first.status, first.superseded_by_id) == ("retired", last.pk)
    assert last.data["summary_end"] == ChatPipeline.objects.get(chat=story).summary_end > end
    prompt = model.server.prompts(TASKS["summary"])[-1]
    assert "Summary so far:\nFirst they found the ledger." in prompt
    assert f"New messages (#{end} to" in prompt


def test_a_time_skip_closes_a_scene_with_a_linked_recap_and_a_knowledge_pass(model, story, user, character):
    def text(i):
        return "The next morning the fog had lifted over the docks." if i == 12 else f"Talk at the ledger desk {i}."

    add_turns(story, 20, text=text)
    process(story)
    scene = Scene.objects.get(chat=story)
    assert (scene.start_index, scene.end_index) == (0, 12)
    assert scene.cue.startswith("time: ")
    recap = Memory.objects.get(pk=scene.recap_memory_id)
    assert recap.kind == "scene_recap" and recap.content.startswith("Mira and Rowan examined the harbour ledger")
    linked = set(scene.source_memory_ids)
    assert linked and linked == set(recap.data["source_memory_ids"])
    extracted = memories(user, kind__in=["revelation", "detail", "fact", "event", "relationship", "arc"])
    assert linked <= set(extracted.values_list("pk", flat=True))
    assert scene.recap_versions[0]["version"] == 1 and scene.epistemic_done
    knows = memories(user, kind="epistemic", data__stance="knows").get()
    assert (knows.character_id, knows.chat_id) == (character.pk, None)  # Mira's own, persistent
    hiding = memories(user, kind="epistemic", data__stance="hiding").get()
    assert (hiding.chat_id, hiding.data["target"]) == (story.pk, "Mira")  # Corvin is no card character
    # The scene tier continues after the break, and finds no other.
    assert ChatPipeline.objects.get(chat=story).through["scenes"] == 20


def test_with_the_model_check_a_declined_break_keeps_the_scene_going(model, story, user):
    extraction_settings_set(user=user, data={"scene_model_check": True})
    model.server.on(TASKS["scene_check"], "NO")

    def text(i):
        return "Hours later, still at the desk, they read on." if i == 12 else f"Talk {i}."

    add_turns(story, 20, text=text)
    process(story)
    assert not Scene.objects.filter(chat=story).exists()
    job = PipelineJob.objects.filter(chat=story, tier="scenes", state="done").first()
    assert job.result["declined"] == [{"index": 12, "cue": "time: “Hours later”"}]


def test_profiles_after_profile_every_messages_and_again_when_stale(model, story, user):
    extraction_settings_set(user=user, data={"profile_every": 20, "profile_stale_minutes": 30})
    add_turns(story, 20)
    process(story)
    profiles = memories(user, kind="profile")
    assert sorted(p.data["section"] for p in profiles) == ["character_state", "relationship_matrix", "world_state"]
    assert profiles.get(data__section="relationship_matrix").data["relationships"][0]["confidence"] == 0.7
    prompt = model.server.prompts(TASKS["profiles"])[0]
    assert "Long-term memories:\n- Mira was born in the drowned village of Hollin." in prompt
    assert "Relationships:\n- Mira → Rowan: wary (medium), curious (high)" in prompt
    add_turns(story, 2)
    process(story)
    assert memories(user, kind="profile").count() == 3  # 2 new messages, profiles fresh: not rebuilt
    ChatPipeline.objects.filter(chat=story).update(profiles_built_at=timezone.now() - timedelta(minutes=31))
    add_turns(story, 1)
    process(story)
    assert memories(user, kind="profile").count() == 6
    assert memories(user, kind="profile", status="active").count() == 3


def test_continuity_flags_a_contradiction_with_a_repair_note_on_profile_b(model, story, user):
    model.server.on(
        TASKS["continuity"],
        "[contradiction] Mira says she never saw the key, but she gave it to Rowan in #4.\n"
        "[repair] Mira remembers handing Rowan the brass key.",
    )
    add_turns(story, 3)
    process(story)
    check = ContinuityCheck.objects.get(chat=story)
    assert (check.message_index, check.status) == (2, "contradiction")
    assert check.findings == ["Mira says she never saw the key, but she gave it to Rowan in #4."]
    assert check.repair_note == "Mira remembers handing Rowan the brass key."
    prompt = model.server.prompts(TASKS["continuity"])[0]
    assert "A harbour clerk with a sharp eye." in prompt  # the card is part of the check


def test_continuity_is_by_hand_on_a_local_model(model, story, user):
    model.profile = "A"
    model.save(update_fields=["profile"])
    add_turns(story, 3)
    process(story)
    assert not ContinuityCheck.objects.filter(chat=story).exists()


def test_a_group_chat_is_batched_by_whole_rounds(model, user):
    mira, tobin = CharacterFactory(user=user, name="Mira"), CharacterFactory(user=user, name="Tobin")
    chat = chat_create(user=user, title="Group", character_ids=[mira.pk, tobin.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    speakers = ["Rowan", "Mira", "Tobin"] * 4  # four rounds of the user and two responders
    from apps.chats.models import Message

    Message.objects.bulk_create(
        Message(chat=chat, index=i, name=name, is_user=name == "Rowan", mes=f"{name} speaks, turn {i}.")
        for i, name in enumerate(speakers + ["Rowan"])
    )
    Chat.objects.filter(pk=chat.pk).update(message_count=len(speakers) + 1)
    chat.refresh_from_db()
    process(chat)
    job = PipelineJob.objects.get(chat=chat, tier="session")
    # The round begun by the last user message (#12) is still under way: the batch stops before it.
    assert job.result["range"] == [0, 11]


def test_an_away_recap_is_written_when_a_person_returns_after_the_threshold(model, story, user):
    add_turns(story, 4)
    assert chat_opened(user=user, chat=story) == (None, False)  # just active
    long_ago = timezone.now() - timedelta(hours=10)
    ChatPipeline.objects.filter(chat=story).update(last_active_at=long_ago)
    Chat.objects.filter(pk=story.pk).update(updated_at=long_ago)
    story.refresh_from_db()
    recap, started = chat_opened(user=user, chat=story)
    assert started and recap.state == "pending" and recap.away_since == long_ago
    chat_run(chat_id=story.pk)
    recap.refresh_from_db()
    assert recap.state == "ready" and recap.text == STORY["recap"]
    prompt = model.server.prompts(TASKS["recap"])[0]
    assert "10 hours" in prompt
    assert chat_opened(user=user, chat=story) == (recap, False)  # shown until dismissed, not written again
    assert Recap.objects.filter(chat=story).count() == 1
