"""World Info activation, rule by rule, as SillyTavern 1.19.0's `checkWorldInfo` decides (docs/LOREBOOKS.md)."""

from __future__ import annotations

import random

import pytest

from apps.lorebooks.services.fields import entries_clean
from apps.lorebooks.services.keys import Haystack, RegexBudget, key_compile, key_matches
from apps.lorebooks.services.scan import Book, Scanned, Settings, scan


def _book(*entries, name="World", kind="global"):
    """A book as SillyTavern's editor saves one: every field present, its defaults where not given."""
    return Book(
        name, kind, entries_clean({str(n): dict(uid=n, **entry) for n, entry in enumerate(entries)}, fill=True)
    )


def _scan(books, messages, *, settings=None, max_context=100_000, timed=None, **kwargs):
    books = books if isinstance(books, list) else [books]
    return scan(books, Scanned(
        messages=list(reversed(messages)), settings=settings or Settings(), max_context=max_context,
        count_tokens=lambda text: len(text.split()), timed={} if timed is None else timed, **kwargs,
    ))  # fmt: skip


def _uids(result):
    return [entry["uid"] for entry in result.entries]


def test_primary_key_activates_case_insensitively_by_default():
    result = _scan(_book({"key": ["Dragon"], "content": "Dragons breathe fire."}), ["I saw a dragon!"])
    assert _uids(result) == [0]
    assert result.before == ["Dragons breathe fire."]
    assert result.entries[0]["why"] == {"why": "key", "key": "Dragon", "depth": 0, "primary": "Dragon"}


def test_case_sensitive_entry_needs_the_same_case():
    book = _book({"key": ["Dragon"], "content": "x", "caseSensitive": True})
    assert _uids(_scan(book, ["a dragon"])) == []
    assert _uids(_scan(book, ["a Dragon"])) == [0]


def test_whole_words_default_and_entry_override():
    book = _book({"key": ["cat"], "content": "a"}, {"key": ["cat"], "content": "b", "matchWholeWords": False})
    assert _uids(_scan(book, ["concatenate"])) == [1]
    assert _uids(_scan(book, ["the cat."])) == [0, 1]
    # a key of several words is found anywhere, even inside words
    assert _uids(_scan(_book({"key": ["at ca"], "content": "c"}), ["concat cat"])) == [0]


def test_regex_key_uses_its_own_flags_and_ignores_case_setting():
    book = _book({"key": ["/drag(on|in)s?/"], "content": "x"}, {"key": ["/DRAGON/i"], "content": "y"})
    assert _uids(_scan(book, ["Two dragons"])) == [0, 1]
    assert _uids(_scan(book, ["DRAGON"])) == [1]


def test_scan_depth_global_and_per_entry():
    book = _book({"key": ["sword"], "content": "a"}, {"key": ["sword"], "content": "b", "scanDepth": 3})
    messages = ["the sword", "one", "two"]  # oldest first: the sword is three messages back
    assert _uids(_scan(book, messages)) == [1]
    assert _uids(_scan(book, messages, settings=Settings(depth=3))) == [0, 1]


@pytest.mark.parametrize(
    ("logic", "text", "activates"),
    [
        (0, "apple banana", True), (0, "apple", False),  # AND ANY
        (1, "apple banana cherry", False), (1, "apple banana", True),  # NOT ALL
        (2, "apple", True), (2, "apple cherry", False),  # NOT ANY
        (3, "apple banana cherry", True), (3, "apple banana", False),  # AND ALL
    ],
)  # fmt: skip
def test_selective_logic(logic, text, activates):
    book = _book({"key": ["apple"], "keysecondary": ["banana", "cherry"], "selectiveLogic": logic, "content": "x"})
    assert _uids(_scan(book, [text])) == ([0] if activates else [])


def test_a_field_the_file_lacks_reads_as_javascripts_undefined():
    raw = {"0": {"uid": 0, "key": ["salt"], "keysecondary": ["vinegar"], "content": "not selective: no secondary"},
           "1": {"uid": 1, "key": ["salt"], "content": "no useProbability: never rolled", "probability": 0},
           "2": {"uid": 2, "key": ["salt"], "content": "no position: activated, placed nowhere"}}  # fmt: skip
    raw["0"]["position"] = raw["1"]["position"] = 0
    result = _scan(Book("W", "global", entries_clean(raw)), ["salt"])
    assert _uids(result) == [0, 1, 2]
    assert result.before == ["no useProbability: never rolled", "not selective: no secondary"]


def test_constant_and_disabled():
    book = _book({"constant": True, "content": "always"}, {"constant": True, "disable": True, "content": "never"})
    result = _scan(book, ["hello"])
    assert _uids(result) == [0] and result.entries[0]["why"] == {"why": "constant"}


def test_probability_rolls_and_zero_never_activates():
    book = _book({"key": ["x"], "content": "a", "probability": 0}, {"key": ["x"], "content": "b", "probability": 50})
    seen = {tuple(_uids(_scan(book, ["x"], rng=random.Random(seed)))) for seed in range(40)}
    assert seen == {(), (1,)}
    assert _uids(_scan(book, ["x"])) in ([], [1])
    always = _book({"key": ["x"], "content": "a", "probability": 0, "useProbability": False})
    assert _uids(_scan(always, ["x"])) == [0]


def test_recursion_and_its_exclusions():
    book = _book(
        {"key": ["castle"], "content": "The castle is held by the duke."},
        {"key": ["duke"], "content": "The duke is old."},
        {"key": ["duke"], "content": "excluded", "excludeRecursion": True},
        {"key": ["old"], "content": "never: the duke's entry prevents recursion", "order": 1},
    )
    result = _scan(book, ["We reach the castle."])
    assert _uids(result) == [0, 1, 3]
    assert result.entries[1]["why"]["recursion"] is True
    assert _uids(_scan(book, ["We reach the castle."], settings=Settings(recursive=False))) == [0]
    book.entries[1]["preventRecursion"] = True
    assert _uids(_scan(book, ["We reach the castle."])) == [0, 1]


def test_delay_until_recursion_levels():
    book = _book(
        {"key": ["start"], "content": "alpha"},
        {"key": ["alpha"], "content": "beta", "delayUntilRecursion": 2},
        {"key": ["alpha"], "content": "gamma", "delayUntilRecursion": True},
        {"key": ["start"], "content": "never in the first pass", "delayUntilRecursion": True},
    )
    result = _scan(book, ["start"])
    assert _uids(result) == [0, 2, 3, 1]


def test_inclusion_group_prioritized_winner_and_weighted_draw():
    book = _book(
        {"key": ["x"], "content": "a", "group": "g", "order": 10},
        {"key": ["x"], "content": "b", "group": "g", "order": 20, "groupOverride": True},
        {"key": ["x"], "content": "c", "group": "g", "order": 30},
    )
    assert _uids(_scan(book, ["x"])) == [1]
    for entry in book.entries:
        entry["groupOverride"] = False
    winners = {tuple(_uids(_scan(book, ["x"], rng=random.Random(seed)))) for seed in range(60)}
    assert winners == {(0,), (1,), (2,)}


def test_group_scoring_keeps_the_best_matching_member():
    book = _book(
        {"key": ["x"], "content": "a", "group": "g"},
        {"key": ["x", "y"], "content": "b", "group": "g", "useGroupScoring": True},
    )
    # entry 0 is not scored (the setting is off) and stays in the draw; entry 1 scores 2 of 2
    assert {tuple(_uids(_scan(book, ["x y"], rng=random.Random(s)))) for s in range(30)} == {(0,), (1,)}
    book.entries[0]["useGroupScoring"] = True
    assert {tuple(_uids(_scan(book, ["x y"], rng=random.Random(s)))) for s in range(30)} == {(1,)}


def test_insertion_order_and_positions():
    book = _book(
        {"constant": True, "content": "B50", "order": 50, "position": 0},
        {"constant": True, "content": "B10", "order": 10, "position": 0},
        {"constant": True, "content": "A", "position": 1},
        {"constant": True, "content": "T", "position": 2},
        {"constant": True, "content": "M", "position": 3},
        {"constant": True, "content": "D1", "position": 4, "depth": 1, "role": 1, "order": 5},
        {"constant": True, "content": "D2", "position": 4, "depth": 1, "role": 1, "order": 6},
        {"constant": True, "content": "E", "position": 5},
        {"constant": True, "content": "O", "position": 7, "outletName": "lore"},
    )
    result = _scan(book, ["hi"])
    assert result.before == ["B10", "B50"]  # lowest order first: the highest is nearest the chat
    assert (result.after, result.an_top, result.an_bottom) == (["A"], ["T"], ["M"])
    assert result.depth == [{"depth": 1, "role": 1, "entries": ["D1", "D2"]}]
    assert result.examples == [("before", "E")] and result.outlets == {"lore": ["O"]}


def test_budget_stops_at_a_share_of_the_context_unless_ignored():
    book = _book(
        {"constant": True, "content": "one two three four", "order": 30},
        {"constant": True, "content": "five six seven eight", "order": 20},
        {"constant": True, "content": "nine", "order": 10, "ignoreBudget": True},
    )
    # 25% of 32 tokens = 8: the first entry's 4 words fit, the second's would make 8
    assert _uids(_scan(book, ["hi"], max_context=32)) == [0, 2]
    assert _uids(_scan(book, ["hi"], max_context=32, settings=Settings(budget=100, budget_cap=3))) == [2]


def test_sticky_cooldown_and_delay_over_turns():
    book = _book({"key": ["ring"], "content": "The ring glows.", "sticky": 2, "cooldown": 2})
    timed: dict = {}
    chat = ["the ring"]
    assert _uids(_scan(book, chat, timed=timed)) == [0]
    assert timed["sticky"]["World.0"]["end"] == 3
    chat += ["no key here", "still nothing"]  # length 3: stickiness ends, the cooldown starts
    chat = chat[:2]
    assert _uids(_scan(book, chat, timed=timed)) == [0] and _scan(book, chat, timed=timed).entries[0]["why"] == {
        "why": "sticky"
    }
    chat += ["the ring again"]
    assert _uids(_scan(book, chat, timed=timed)) == []  # on cooldown
    chat += ["ring", "ring"]
    assert _uids(_scan(book, chat, timed=timed)) == [0]
    delayed = _book({"key": ["ring"], "content": "x", "delay": 3})
    assert _uids(_scan(delayed, ["ring", "ring"])) == []
    assert _uids(_scan(delayed, ["ring", "ring", "ring"])) == [0]


def test_dry_run_changes_no_timed_effect():
    timed: dict = {}
    _scan(_book({"key": ["ring"], "content": "x", "sticky": 2}), ["ring"], timed=timed, dry_run=True)
    assert timed == {"sticky": {}, "cooldown": {}}


def test_chat_lore_is_tried_first_then_character_then_global():
    books = [
        _book({"key": ["x"], "content": "global", "order": 999}, name="G", kind="global"),
        _book({"key": ["x"], "content": "char", "order": 1}, name="C", kind="character"),
        _book({"key": ["x"], "content": "chat", "order": 1}, name="H", kind="chat"),
    ]
    assert [entry["world"] for entry in _scan(books, ["x"]).entries] == ["H", "C", "G"]


def test_card_fields_are_scanned_only_when_the_entry_asks():
    book = _book({"key": ["elf"], "content": "a"}, {"key": ["elf"], "content": "b", "matchCharacterDescription": True})
    result = _scan(book, ["hi"], globals={"characterDescription": "An elf."})
    assert _uids(result) == [1] and result.entries[0]["why"]["field"] == "characterDescription"


def test_decorators_force_or_forbid_activation():
    book = _book({"key": ["x"], "content": "@@dont_activate\nno"}, {"content": "@@activate\nyes"})
    result = _scan(book, ["x"])
    assert _uids(result) == [1] and result.before == ["yes"]


def test_triggers_limit_an_entry_to_generation_types():
    book = _book({"constant": True, "content": "x", "triggers": ["continue"]})
    assert _uids(_scan(book, ["hi"])) == []
    assert _uids(_scan(book, ["hi"], trigger="continue")) == [0]


def test_macros_in_keys_and_content():
    book = _book({"key": ["{{char}}"], "content": "{{char}} is tall."})
    result = _scan(book, ["Hello Seraphina"], resolve=lambda text: text.replace("{{char}}", "Seraphina"))
    assert result.before == ["Seraphina is tall."]


def test_a_runaway_regex_is_stopped_and_counted():
    budget = RegexBudget(seconds=0.2)
    pattern = key_compile("/(a|aa)+$/")
    text = "a" * 40 + "!"
    assert key_matches(Haystack(text), "/(a|aa)+$/", case_sensitive=False, whole_words=False, budget=budget) is False
    assert budget.timed_out == ["/(a|aa)+$/"] and pattern is not None
    # Unstopped, this pattern backtracks for minutes over that text. The budget is wall time, which a loaded machine
    # stretches (a test run beside another missed 0.2 s): bounds far under minutes, and the number of tests it took.
    assert budget.spent < 1.0 and budget.tests == 1
    result = _scan(_book(*[{"key": ["/(a|aa)+$/"], "content": str(n)} for n in range(20)]), ["a" * 40 + "!"])
    assert result.regex.exhausted and result.regex.spent < 2.0 and result.regex.tests < 20


WORDS = "Mira Rowan gull ship storm lantern harbour key ring Hale's bell dock tide".split()


def _random_book(rng: random.Random, size: int):
    entries = []
    for _ in range(size):
        entry = {"key": rng.sample(WORDS, rng.randint(1, 2)), "content": " ".join(rng.sample(WORDS, 3)),
                 "order": rng.randint(1, 5)}  # fmt: skip
        if rng.random() < 0.3:
            entry |= {"keysecondary": rng.sample(WORDS, 2), "selectiveLogic": rng.randint(0, 3)}
        if rng.random() < 0.15:
            entry["key"] = [f"/{rng.choice(WORDS)}\\s+\\w+/i"]
        if rng.random() < 0.1:
            entry["matchWholeWords"] = False
        if rng.random() < 0.1:
            entry["preventRecursion"] = True
        if rng.random() < 0.1:
            entry["delayUntilRecursion"] = rng.randint(1, 2)
        if rng.random() < 0.1:
            entry["scanDepth"] = rng.randint(0, 4)
        entries.append(entry)
    return _book(*entries)


@pytest.mark.parametrize("seed", range(40))
def test_recursion_rescanning_only_what_new_text_can_change_gives_the_same_result(seed, monkeypatch):
    from apps.lorebooks.services import scan as scan_module

    rng = random.Random(seed)
    book = _random_book(rng, 60)
    chat = [" ".join(rng.sample(WORDS, 2)) for _ in range(5)]
    pruned = _scan(book, chat, rng=random.Random(seed))
    monkeypatch.setattr(scan_module, "PRUNE", False)
    full = _scan(book, chat, rng=random.Random(seed))
    assert [(e["uid"], e["why"]) for e in pruned.entries] == [(e["uid"], e["why"]) for e in full.entries]
    assert (pruned.before, pruned.after, pruned.depth) == (full.before, full.after, full.depth)


def test_whole_word_matching_is_javascripts_non_word_boundary():
    import re

    rng = random.Random(3)
    alphabet = "ab_1 -'.é\n"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        key = "".join(rng.choice("ab_1'é") for _ in range(rng.randint(1, 3)))
        reference = re.search(f"(?:^|[^A-Za-z0-9_])({re.escape(key)})(?:$|[^A-Za-z0-9_])", text) is not None
        found = key_matches(Haystack(text), key, case_sensitive=True, whole_words=True, budget=RegexBudget())
        assert found == reference, (text, key)
