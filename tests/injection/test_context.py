"""The context builder on memories placed by hand: which slot holds what, where, within which budget; macros;
unified mode; the triggered recall; the responding character's knowledge; the one-shot repair note."""

import pytest

from apps.accounts.services import settings_document_get
from apps.chats.services.characters import character_create
from apps.chats.services.chats import chat_create
from apps.extraction.models import ContinuityCheck
from apps.injection.services.budgets import budgets_for, classify_turn, snap
from apps.injection.services.context import context_build
from apps.injection.services.settings import InjectionSettings, injection_settings_get, injection_settings_save
from apps.memories.services.memories import memory_create, memory_retire
from tests.injection.helpers import say

pytestmark = pytest.mark.django_db


def configure(user, **values) -> InjectionSettings:
    return injection_settings_save(user=user, values=values, integrity=settings_document_get(user=user).integrity)


@pytest.fixture
def world(user, story, character, remember, scripted):
    """A chat with one memory of every tier (and a retired fact that must never show)."""
    say(story, ("Mira", "The lamps are lit."), ("Rowan", "Where is the ledger?"))
    made = {
        "summary": remember("summary", "Mira and Rowan found the forged seal.", chat=story),
        "fact": remember("fact", "Mira was born in Hollin.", character=character, importance=3),
        "retired": remember("fact", "Mira hates the sea.", character=character),
        "detail": remember("detail", "Rowan pocketed a brass key.", chat=story),
        "scene": remember("scene_recap", "They examined the ledger at dusk.", chat=story),
        "arc": remember("arc", "Find who forged the seal.", chat=story, data={"status": "open"}),
        "bond": remember(
            "relationship",
            "Mira → Rowan: wary (medium)",
            character=character,
            data={"pair": ["mira", "rowan"], "history": True},
        ),
        "profile": remember("profile", "Mira is tense.", chat=story, data={"section": "character_state"}),
        "canon": remember("canon", "Mira of Hollin unmasked the forger.", character=character),
        "knows": remember(
            "epistemic",
            "Mira knows: the seal is forged",
            character=character,
            data={"holder": "Mira", "stance": "knows"},
        ),
        "state": remember("state", "Rowan (character): location=harbour", chat=story, data={"entity": "Rowan"}),
    }
    memory_retire(memory=made["retired"])
    return made


def test_each_slot_holds_its_tier_at_its_place(user, story, world):
    context = context_build(user=user, chat=story, preview=True)
    slots = context.slots
    assert slots["smart_memory_short"]["text"] == "[Story so far]\nMira and Rowan found the forged seal."
    assert slots["smart_memory_long"]["text"] == "[Long-term memories]\n- Mira was born in Hollin."
    assert "Mira hates the sea." not in str(slots)  # retired: never injected
    assert slots["smart_memory_session"]["text"] == "[This session]\n- Rowan pocketed a brass key."
    assert slots["smart_memory_scenes"]["text"] == "[Earlier scenes]\n- They examined the ledger at dusk."
    assert slots["smart_memory_arcs"]["text"] == "[Story arcs]\n- Find who forged the seal."
    assert slots["smart_memory_relationships"]["text"] == "[Relationships]\n- Mira → Rowan: wary (medium)"
    assert slots["smart_memory_profiles"]["text"] == "[Profiles]\nCharacter state: Mira is tense."
    assert slots["smart_memory_canon"]["text"] == "[Canon]\nMira of Hollin unmasked the forger."
    assert slots["smart_memory_epistemic"]["text"] == "[What Mira knows]\n- Mira knows: the seal is forged"
    assert slots["smart_memory_state_ledger"]["text"] == "[Current state]\n- Rowan (character): location=harbour"
    assert slots["smart_memory_long"]["memory_ids"] == [world["fact"].pk]
    places = {key: (slot["position"], slot["depth"], slot["role"]) for key, slot in slots.items()}
    assert places["smart_memory_canon"] == ("in_prompt", 0, "system")
    assert places["smart_memory_profiles"] == ("in_prompt", 1, "system")
    assert places["smart_memory_triggered"] == ("in_chat", 4, "system")
    assert places["smart_memory_scenes"] == ("in_chat", 6, "system")
    assert places["smart_memory_arcs"] == ("in_chat", 2, "system")
    assert slots["smart_memory_unified"]["delivery"] == "off"
    assert len(slots) == 13
    st = {item["key"]: item for item in context.sillytavern}
    assert len(st) == 13 and st["smart_memory_session"] | {"value": ""} == {
        "key": "smart_memory_session",
        "value": "",
        "position": 1,
        "depth": 3,
        "scan": False,
        "role": 0,
    }
    assert st["smart_memory_long"]["position"] == 0 and st["smart_memory_long"]["value"].startswith("[Long-term")
    assert st["smart_memory_unified"]["value"] == ""  # sent empty: a stale slot is cleared in SillyTavern


def test_the_tiers_read_the_chat_and_its_characters_memories_and_no_others(
    user, other_user, story, character, world, remember
):
    elsewhere = chat_create(user=user, title="Elsewhere", character_ids=[character.pk], user_name="Rowan")
    stranger = character_create(user=user, name="Corvin")
    theirs = character_create(user=other_user, name="Mira")
    remember("fact", "Rowan once sailed to Vell.", chat=elsewhere, importance=3)
    remember("fact", "Corvin forged the seal.", character=stranger, importance=3)
    memory_create(user=other_user, kind="fact", content="Mira fears the dark.", character=theirs, importance=3)

    long = context_build(user=user, chat=story, preview=True).slots["smart_memory_long"]

    assert long["memory_ids"] == [world["fact"].pk]  # the chat's own and its character's: no other chat's or user's


def test_a_slot_switched_off_is_sent_empty_and_depths_follow_the_settings(user, story, world):
    configure(user, slots={"arcs": {"enabled": False}, "session": {"depth": 9}})
    context = context_build(user=user, chat=story, preview=True)
    assert context.slots["smart_memory_arcs"]["delivery"] == "off" and context.slots["smart_memory_arcs"]["text"] == ""
    assert context.slots["smart_memory_arcs"]["content"]  # still computed, for the preview
    assert context.slots["smart_memory_session"]["depth"] == 9


def test_budgets_trim_a_tier_most_important_first_and_report_it(user, story, character, remember, scripted):
    say(story, ("Rowan", "Hello."))
    for i in range(12):
        remember(
            "fact",
            f"Fact number {i} about the harbour and its long history of trade.",
            character=character,
            importance=3 if i == 7 else 1,
        )
    configure(user, budgets={"long": 40})
    context = context_build(user=user, chat=story, preview=True)
    stats = context.stats["long"]
    assert stats["budget"] == 40 and stats["injected"] <= 40 and stats["full"] > stats["injected"]
    lines = context.slots["smart_memory_long"]["content"].splitlines()[1:]
    # Half the long-term budget is kept for what the turn recalls: the slot holds the most important first.
    assert lines[0] == "- Fact number 7 about the harbour and its long history of trade."


def test_simple_mode_splits_one_total_as_the_defaults_do(user):
    settings = InjectionSettings(budget_mode="simple", total_budget=2375)  # half the defaults' sum
    budgets = budgets_for(settings, turn="dialogue", demand={})
    assert budgets["long"] == 250 and budgets["arcs"] == 350 and budgets["short"] == 500


def test_auto_tune_sizes_tiers_from_demand_with_headroom_snapped_to_50(user):
    settings = InjectionSettings(auto_tune=True)
    budgets = budgets_for(settings, turn="dialogue", demand={"long": 1000.0, "arcs": 90.0, "short": 9000.0})
    assert budgets["long"] == snap(1150) == 1150 and budgets["arcs"] == 100
    assert budgets["short"] == 1000  # the summary is exempt: it corrects itself
    assert budgets["session"] == 400  # no demand seen yet: its setting


def test_adaptive_budgets_weigh_tiers_by_the_kind_of_turn(user):
    settings = InjectionSettings(adaptive=True)
    assert budgets_for(settings, turn="action", demand={})["state_ledger"] == 300  # 200 × 1.5
    assert budgets_for(settings, turn="intimate", demand={})["relationships"] == 400  # 250 × 1.5 = 375 → 400
    assert budgets_for(settings, turn="transition", demand={})["scenes"] == 400  # 300 × 1.4 → 420 → 400


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('"Where were you last night?" she asks.', "dialogue"),
        ("I draw my sword and charge at the guard, dodging his spear.", "action"),
        ("The next morning we set out and travel north, arriving at dusk.", "transition"),
        ("She leans in and kisses him, her heartbeat racing.", "intimate"),
        ("", "dialogue"),
    ],
)
def test_the_turn_classifier(text, kind):
    assert classify_turn(text)[0] == kind


def test_unified_mode_is_one_block_in_the_seeds_order(user, story, world):
    configure(user, unified=True)
    context = context_build(user=user, chat=story, preview=True)
    unified = context.slots["smart_memory_unified"]
    headers = [line for line in unified["text"].splitlines() if line.startswith("[")]
    assert headers == [
        "[Canon]",
        "[Profiles]",
        "[Long-term memories]",
        "[Story so far]",
        "[Earlier scenes]",
        "[This session]",
        "[Story arcs]",
    ]
    assert all(slot["delivery"] == "off" for key, slot in context.slots.items() if key != "smart_memory_unified")
    assert [item["key"] for item in context.sillytavern if item["value"]] == ["smart_memory_unified"]


def test_macros_found_in_the_card_are_resolved_and_their_slots_not_injected_twice(user, story, world, character):
    character.description = "Mira. Her memories: {{smartmemory-long}} and {{ SmartMemory-State-Ledger }}."
    character.save()
    context = context_build(user=user, chat=story, preview=True)
    assert context.macros["{{smartmemory-long}}"] == "[Long-term memories]\n- Mira was born in Hollin."
    assert context.macros["{{smartmemory-state-ledger}}"].startswith("[Current state]")
    assert context.macros["{{smartmemory-arcs}}"] == ""  # not in the card: inactive
    assert len(context.macros) == 11 and "{{smartmemory-triggered}}" not in context.macros
    assert (
        context.slots["smart_memory_long"]["delivery"] == "macro" and context.slots["smart_memory_long"]["text"] == ""
    )
    assert context.slots["smart_memory_arcs"]["delivery"] == "prompt"


def test_force_mode_resolves_every_macro_and_unified_mode_only_its_own(user, story, world):
    configure(user, force_macros=True)
    forced = context_build(user=user, chat=story, preview=True)
    assert forced.macros["{{smartmemory-arcs}}"] == "[Story arcs]\n- Find who forged the seal."
    assert forced.macros["{{smartmemory-unified}}"] == ""
    configure(user, force_macros=True, unified=True)
    unified = context_build(user=user, chat=story, preview=True)
    assert unified.macros["{{smartmemory-arcs}}"] == "" and unified.macros["{{smartmemory-unified}}"].startswith(
        "[Canon]"
    )


def test_the_knowledge_slot_holds_only_the_responding_characters(user, group, remember, scripted):
    chat, mira, tobin = group
    say(chat, ("Rowan", "Hello both."), ("Tobin", "Evening."))
    remember("epistemic", "Mira knows: the seal is forged", character=mira, data={"holder": "Mira"})
    remember("epistemic", "Tobin suspects: the clerk lies", character=tobin, data={"holder": "Tobin"})
    assert context_build(user=user, chat=chat, preview=True).slots["smart_memory_epistemic"]["text"] == (
        "[What Tobin knows]\n- Tobin suspects: the clerk lies"
    )  # Tobin spoke last
    asked = context_build(user=user, chat=chat, character="mira", preview=True)
    assert asked.slots["smart_memory_epistemic"]["text"] == "[What Mira knows]\n- Mira knows: the seal is forged"


def test_a_repair_note_is_injected_once(user, story, world):
    ContinuityCheck.objects.create(
        user=user, chat=story, message_index=0, status="contradiction", repair_note="Mira still has the key."
    )
    first = context_build(user=user, chat=story)
    assert first.slots["smart_memory_repair"]["text"] == "[Continuity note]\nMira still has the key."
    assert (
        first.slots["smart_memory_repair"]["position"] == "in_chat"
        and first.slots["smart_memory_repair"]["depth"] == 0
    )
    assert context_build(user=user, chat=story).slots["smart_memory_repair"]["text"] == ""
    assert ContinuityCheck.objects.get(chat=story).repair_consumed_at is not None


def test_a_preview_uses_nothing_up(user, story, world):
    ContinuityCheck.objects.create(user=user, chat=story, message_index=0, status="contradiction", repair_note="x")
    context_build(user=user, chat=story, preview=True)
    assert ContinuityCheck.objects.get(chat=story).repair_consumed_at is None


def test_settings_read_leniently_and_saved_strictly(user):
    from apps.accounts.services import settings_document_patch
    from apps.common.exceptions import ApplicationError

    document = settings_document_get(user=user)
    settings_document_patch(
        user=user,
        patch={"smart_memory": {"budgets": {"long": -5, "arcs": 900}, "unified": "yes", "slots": {"nope": {}}}},
        kind="merge",
        integrity=document.integrity,
    )
    settings = injection_settings_get(user=user)
    assert settings.budgets["long"] == 500 and settings.budgets["arcs"] == 900 and settings.unified is False
    assert len(settings.problems) == 3
    with pytest.raises(ApplicationError) as bad:
        configure(user, budgets={"long": 40000})
    assert bad.value.extra == {"field": "budgets.long"}
    with pytest.raises(ApplicationError) as stale:
        injection_settings_save(user=user, values={}, integrity=document.integrity)  # changed since: 409
    assert stale.value.status == 409


def test_saving_keeps_what_else_a_client_keeps_in_the_namespace(user):
    from apps.accounts.services import settings_document_patch

    document = settings_document_get(user=user)
    settings_document_patch(
        user=user, patch={"smart_memory": {"theme": "dark"}}, kind="merge", integrity=document.integrity
    )
    configure(user, unified=True)
    data = settings_document_get(user=user).data["smart_memory"]
    assert data["theme"] == "dark" and data["unified"] is True
