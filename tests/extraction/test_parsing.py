"""The tiers' parsers: Smart Memory's line formats (docs/GLOSSARY.md), read leniently (bullets, fences, case, missing
importance) and strictly (a line not understood is returned as unparsed, never guessed)."""

from apps.extraction.services.parsing.arcs import parse_arcs
from apps.extraction.services.parsing.epistemics import parse_epistemics
from apps.extraction.services.parsing.memories import MAX_DESCRIPTORS, parse_memories
from apps.extraction.services.parsing.profiles import parse_profiles
from apps.extraction.services.parsing.prose import parse_continuity, parse_prose, parse_yes_no
from apps.extraction.services.parsing.state import parse_state
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS


def test_memory_lines_with_importance_scope_and_entities():
    parsed = parse_memories(
        "[fact:3:permanent:entity=Mira/character,Hollin/place] Mira was born in Hollin.\n"
        "[event:1:session] The bell rang twice.",
        LONG_TERM_KINDS,
    )
    first, second = parsed.items
    assert (first.kind, first.importance, first.time_scope, first.text) == (
        "fact",
        3,
        "permanent",
        "Mira was born in Hollin.",
    )
    assert first.entities == [{"name": "Mira", "type": "character"}, {"name": "Hollin", "type": "place"}]
    assert (second.kind, second.importance, second.time_scope, second.entities) == ("event", 1, "session", [])
    assert parsed.unparsed == []


def test_models_decorations_are_forgiven_but_unknown_kinds_are_not_guessed():
    text = (
        "```\n- **[Revelation:high] Corvin forged the seal.**\n* [detail] A brass key.\n1. [fact:2] Wrong tier.\n```"
    )
    parsed = parse_memories(text, SESSION_KINDS)
    assert [(m.kind, m.importance, m.text) for m in parsed.items] == [
        ("revelation", 3, "Corvin forged the seal."),
        ("detail", 2, "A brass key."),
    ]
    assert parsed.unparsed == ["[fact:2] Wrong tier."]


def test_none_is_an_empty_answer_and_prose_is_unparsed():
    assert parse_memories("NONE", SESSION_KINDS).empty
    assert parse_memories("None.", SESSION_KINDS).empty
    prose = parse_memories("Here are the memories you asked for!", SESSION_KINDS)
    assert prose.items == [] and not prose.empty and prose.unparsed == ["Here are the memories you asked for!"]


def test_relationship_history_lines_keep_descriptor_and_magnitude():
    parsed = parse_memories(
        "[rel] Mira -> Rowan: wary(medium), Curious (very high), sad(unmeasurable)\n[rel] nonsense",
        LONG_TERM_KINDS,
        relationships=True,
    )
    [relation] = parsed.items
    assert (relation.source, relation.target) == ("Mira", "Rowan")
    assert relation.descriptors == [("wary", "medium"), ("curious", "high")]
    assert relation.text == "Mira → Rowan: wary (medium), curious (high)"
    assert parsed.unparsed == ["[rel] nonsense"]


def test_at_most_six_descriptors_a_pair():
    line = "[rel] A -> B: " + ", ".join(f"d{i}(low)" for i in range(9))
    [relation] = parse_memories(line, LONG_TERM_KINDS, relationships=True).items
    assert len(relation.descriptors) == MAX_DESCRIPTORS


def test_arcs_open_persistent_and_resolved_by_number():
    parsed = parse_arcs(
        "[arc] Find the forger.\n[arc:persistent] Mira's vow to rebuild Hollin.\n[resolved:2] The key was found.\n"
        "[resolved] #3 The debt was paid.\n[resolved] No number here.\n[quest] unknown"
    )
    opened = [(a.text, a.persistent) for a in parsed.items if a.action == "open"]
    resolved = [(a.number, a.text) for a in parsed.items if a.action == "resolve"]
    assert opened == [("Find the forger.", False), ("Mira's vow to rebuild Hollin.", True)]
    assert resolved == [(2, "The key was found."), (3, "The debt was paid."), (None, "No number here.")]
    assert parsed.unparsed == ["[quest] unknown"]


def test_epistemic_stances_and_hiding_with_a_target():
    parsed = parse_epistemics(
        "[knows] Mira | the seal is forged\n[believes] Rowan | Corvin is loyal\n"
        "[hiding] Corvin from Mira | he pressed the seal\n[hiding] Corvin | no target\n[guesses] Mira | odd"
    )
    assert [(k.stance, k.holder, k.target, k.fact) for k in parsed.items] == [
        ("knows", "Mira", "", "the seal is forged"),
        ("believes", "Rowan", "", "Corvin is loyal"),
        ("hiding", "Corvin", "Mira", "he pressed the seal"),
    ]
    assert parsed.items[1].text == "Rowan wrongly believes: Corvin is loyal"
    assert parsed.items[2].text == "Corvin hides from Mira: he pressed the seal"
    assert parsed.unparsed == ["[hiding] Corvin | no target", "[guesses] Mira | odd"]


def test_state_lines_map_synonyms_clear_values_and_drop_unknown_fields():
    parsed = parse_state(
        "[state:Kael:character] location=the vault | Goal = escape | items=rope, lamp | injuries=none | hat=red\n"
        "[state:Sunstone:item] owner=Kael\n[state:Vault:planet] hazards=gas\n[state:Kael] favourite=blue"
    )
    kael, stone = parsed.items
    assert (kael.entity, kael.type) == ("Kael", "character")
    assert kael.fields == {
        "location": "the vault",
        "active_goal": "escape",
        "carried_items": "rope, lamp",
        "injuries": "",
    }
    assert (stone.type, stone.fields) == ("object", {"owner": "Kael"})
    assert parsed.unparsed == ["[state:Vault:planet] hazards=gas", "[state:Kael] favourite=blue"]


def test_profile_sections_and_relationship_confidence():
    parsed = parse_profiles(
        "<character_state>Mira is tired.</character_state>\n<world_state>Winter.\n"
        "<relationship_matrix>\nMira -> Rowan: trusts him [confidence: 0.8]\nnot a pair\n</relationship_matrix>"
    )
    sections = {s.section: s for s in parsed.items}
    assert sections["character_state"].text == "Mira is tired."
    assert sections["world_state"].text == "Winter."  # an unclosed section ends at the next tag
    assert sections["relationship_matrix"].relationships == [
        {"source": "Mira", "target": "Rowan", "text": "trusts him", "confidence": 0.8}
    ]
    assert parse_profiles("<world_state>Only this</world_state>").unparsed == [
        "no <character_state> section",
        "no <relationship_matrix> section",
    ]


def test_continuity_verdicts():
    assert parse_continuity("OK").ok
    verdict = parse_continuity(
        "[contradiction] Tam speaks though he died in #4.\n[repair] Tam is dead; have Hesper mourn him."
    )
    assert not verdict.ok and verdict.findings == ["Tam speaks though he died in #4."]
    assert verdict.repair == "Tam is dead; have Hesper mourn him."
    assert parse_continuity("I think it is mostly fine?") is None
    assert parse_continuity("") is None


def test_yes_no_and_prose():
    assert parse_yes_no("Yes.") is True
    assert parse_yes_no("**NO** — same room") is False
    assert parse_yes_no("Perhaps") is None
    assert parse_prose("```\nSummary: They left at dawn.\n```") == "They left at dawn."
    assert parse_prose("Recap: Mira found the seal.") == "Mira found the seal."
    assert parse_prose("Previously on the harbour: Mira found the seal.").startswith("Previously on")


def test_a_superscript_digit_in_a_tag_is_not_a_number():
    """A "²" is a digit to str.isdigit, not to int(): a model writing one raised ValueError out of the parse."""
    parsed = parse_memories("[fact:²] Mira was born in Hollin.", LONG_TERM_KINDS)
    assert parsed.items[0].text == "Mira was born in Hollin." and parsed.items[0].importance != "²"
    resolved = [(a.number, a.text) for a in parse_arcs("[resolved:²] The key was found.").items]
    assert resolved == [(None, "The key was found.")]
