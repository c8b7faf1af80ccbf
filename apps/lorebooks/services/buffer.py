"""The text an entry scans and how its keys are looked for in it, during one scan (services/scan.py): the newest
messages to the entry's depth, the card fields it asks for and what recursion added (SillyTavern's
`WorldInfoBuffer`), with what each entry's matching needs worked out once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.lorebooks.services.fields import MAX_SCAN_DEPTH
from apps.lorebooks.services.keys import Haystack, RegexBudget, key_matches, plain_kind

NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = 0, 1, 2, 3
MATCHER = "\x01"
JOINER = "\n" + MATCHER


@dataclass(frozen=True)
class Settings:
    """SillyTavern's World Info settings, with its defaults (default/content/settings.json)."""

    depth: int = 2
    budget: int = 25  # percent of the context
    budget_cap: int = 0
    include_names: bool = True
    recursive: bool = True
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    character_strategy: int = 1  # 0 evenly, 1 character first, 2 global first
    min_activations: int = 0
    min_activations_depth_max: int = 0
    max_recursion_steps: int = 0


class Buffer:
    """The text one entry scans: the newest messages to its depth, the card fields it asks for, and what recursion
    added (`WorldInfoBuffer`)."""

    def __init__(self, scanned: Any):
        self.messages = [message.strip() for message in scanned.messages[:MAX_SCAN_DEPTH]]
        self.globals = scanned.globals
        self.settings = scanned.settings
        self.recurse: list[str] = []
        self.skew = 0
        self._cache: dict[tuple, Haystack] = {}
        self._resolved: dict[str, str] = {}
        self._resolve = scanned.resolve
        self._messages: dict[int, Haystack] = {}

    def message(self, depth: int) -> Haystack:
        """One scanned message alone (0: the newest), to say which message a key was found in."""
        if depth not in self._messages:
            self._messages[depth] = Haystack(MATCHER + self.messages[depth])
        return self._messages[depth]

    def view(self, entry: dict[str, Any]) -> View:
        """What of an entry decides its text and its matching, worked out once a scan (and kept on the scan's copy
        of the entry)."""
        view = entry.get("_view")
        if view is None:
            depth = None if entry.get("scanDepth") is None else min(int(entry["scanDepth"]), MAX_SCAN_DEPTH)
            extras = tuple(flag for flag, name in _GLOBAL_FIELDS.items() if entry.get(flag) and self.globals.get(name))
            case, whole = _case(entry, self.settings), _whole(entry, self.settings)
            primary = [self.resolved(key) for key in entry.get("key") or []]
            secondary = [self.resolved(key) for key in entry.get("keysecondary") or []]
            words = (*_split(primary, case, whole), *_split(primary + secondary, case, whole))
            view = View(depth, extras, case, whole, *words, any(key.startswith("/") for key in primary + secondary))
            entry["_view"] = view
        return view

    def resolved(self, key: str) -> str:
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = self._resolve(key).strip()
        return found

    def depth(self) -> int:
        return self.settings.depth + self.skew

    def added_since(self, count: int) -> Haystack:
        """The text recursion added after its first `count` texts, as the scanned text ends with it."""
        key = ("added", count, len(self.recurse))
        if key not in self._cache:
            self._cache[key] = Haystack(JOINER + JOINER.join(self.recurse[count:]))
        return self._cache[key]

    def text(self, entry: dict[str, Any], state: int) -> Haystack:
        view = self.view(entry)
        depth, extras = view.depth, view.extras
        depth = min(self.depth(), MAX_SCAN_DEPTH) if depth is None else depth
        if depth <= 0:
            return _EMPTY
        key = (depth, extras, state == MIN_ACTIVATIONS, len(self.recurse))
        if key not in self._cache:
            text = MATCHER + JOINER.join(self.messages[:depth])
            for flag in extras:
                text += JOINER + self.globals[_GLOBAL_FIELDS[flag]]
            if self.recurse and state != MIN_ACTIVATIONS:
                text += JOINER + JOINER.join(self.recurse)
            self._cache[key] = Haystack(text)
        return self._cache[key]


_EMPTY = Haystack("")
_GLOBAL_FIELDS = {
    "matchPersonaDescription": "personaDescription",
    "matchCharacterDescription": "characterDescription",
    "matchCharacterPersonality": "characterPersonality",
    "matchCharacterDepthPrompt": "characterDepthPrompt",
    "matchScenario": "scenario",
    "matchCreatorNotes": "creatorNotes",
}


def why_key(buffer: Buffer, entry: dict[str, Any], key: str, scanned: Any, budget: RegexBudget) -> dict[str, Any]:
    """Where a matching key was found: the newest message holding it (its depth, 0 the newest), else the card
    field or the text recursion added. A regex key is tested again on each message within an allowance of the
    build's (`budget`, apart from the activation's): spent, where it stands is not told."""
    depth = entry["scanDepth"] if entry.get("scanDepth") is not None else buffer.depth()
    case, whole = _case(entry, scanned.settings), _whole(entry, scanned.settings)
    for n in range(min(int(depth), len(buffer.messages))):
        if key_matches(buffer.message(n), key, case_sensitive=case, whole_words=whole, budget=budget):
            return {"why": "key", "key": key, "depth": n}
    for flag, name in _GLOBAL_FIELDS.items():
        text = buffer.globals.get(name) or ""
        if entry.get(flag) and text and key_matches(Haystack(text), key, case_sensitive=case, whole_words=whole,
                                                    budget=budget):  # fmt: skip
            return {"why": "key", "key": key, "field": name}
    if budget.exhausted:
        return {"why": "key", "key": key}
    return {"why": "key", "key": key, "recursion": True}


def _case(entry: dict[str, Any], settings: Settings) -> bool:
    return settings.case_sensitive if entry.get("caseSensitive") is None else entry["caseSensitive"]


def _whole(entry: dict[str, Any], settings: Settings) -> bool:
    return settings.match_whole_words if entry.get("matchWholeWords") is None else entry["matchWholeWords"]


def matches(buffer: Buffer, entry: dict[str, Any], key: str, state: int, scanned: Any, budget) -> bool:
    key = buffer.resolved(key)
    if not key:
        return False
    view = buffer.view(entry)
    return key_matches(buffer.text(entry, state), key, case_sensitive=view.case, whole_words=view.whole, budget=budget)


def score(buffer: Buffer, entry: dict[str, Any], *, state: int, scanned: Any, budget: RegexBudget) -> int:
    """How many of the entry's keys the scanned text holds (`getScore`): primary keys, plus the secondary ones
    under AND ANY, or under AND ALL when all of them are found."""
    if not entry.get("key"):
        return 0
    primary = sum(1 for key in entry["key"] if matches(buffer, entry, key, state, scanned, budget))
    secondary_keys = entry.get("keysecondary") or []
    secondary = sum(1 for key in secondary_keys if matches(buffer, entry, key, state, scanned, budget))
    logic = entry.get("selectiveLogic") or 0
    if secondary_keys and (logic == 0 or (logic == 3 and secondary == len(secondary_keys))):
        return primary + secondary
    return primary


@dataclass(frozen=True, slots=True)
class View:
    depth: int | None  # the entry's own scan depth
    extras: tuple[str, ...]  # the card fields it scans
    case: bool
    whole: bool
    # Its primary keys, then all its keys, split in two: those that are a run of word characters matched as a whole
    # word (such a key is found exactly when it is one of the text's word runs: a set tells at once whether any
    # can hold), and the others.
    primary_words: frozenset[str]
    primary_other: tuple[str, ...]
    all_words: frozenset[str]
    all_other: tuple[str, ...]
    has_regex: bool

    def may_hold(self, haystack: Haystack, *, every: bool, budget: RegexBudget) -> bool:
        """Whether any of its primary keys (`every`: of all its keys) can be found in `haystack`."""
        words, other = (self.all_words, self.all_other) if every else (self.primary_words, self.primary_other)
        if words and not words.isdisjoint(haystack.words(not self.case)):
            return True
        for key in other:
            if key_matches(haystack, key, case_sensitive=self.case, whole_words=self.whole, budget=budget):
                return True
        return False


def _split(keys: list[str], case: bool, whole: bool) -> tuple[frozenset[str], tuple[str, ...]]:
    words, other = set(), []
    for key in keys:
        if key:
            how, plain = ("regex", key) if key.startswith("/") else plain_kind(key, case, whole)
            if how == "word":
                words.add(plain)
            else:
                other.append(key)
    return frozenset(words), tuple(other)


def may_change(entry: dict[str, Any], missed: tuple[int, int] | None, buffer: Buffer, budget: RegexBudget) -> bool:
    """Whether a recursion step can change the answer for an entry whose plain keys did not hold before. Recursion
    only appends text, after a separator no key can span (a newline and \\x01: not word characters), so a key is
    found in the longer text only if it is found in what was appended; with none of its keys there, the entry
    misses again, and is not scanned again. Regex keys can span it: their entries are always scanned."""
    if missed is None or missed[0] != buffer.skew:
        return True
    added = buffer.added_since(missed[1])
    return buffer.view(entry).may_hold(added, every=True, budget=budget)
