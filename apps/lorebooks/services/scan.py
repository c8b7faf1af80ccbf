"""Which World Info entries a chat activates, step for step as SillyTavern 1.19.0's `checkWorldInfo` decides
(docs/LOREBOOKS.md, "Activation"): the order the books' entries are tried in, the scan of the newest messages,
keys with their selective logic, constant entries, decorators, timed effects (sticky, cooldown, delay), recursion
with its per-entry rules and delay levels, inclusion groups, probability, and the token budget.

`scan` is a plain function of what it is given: the caller reads the books, the messages and the settings, and
keeps the timed effects it answers (SillyTavern keeps them in the chat's metadata, `timedWorldInfo`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apps.lorebooks.services.buffer import (
    INITIAL,
    MIN_ACTIVATIONS,
    NONE,
    RECURSION,
    Buffer,
    Settings,
    matches,
    may_change,
    score,
    why_key,
)
from apps.lorebooks.services.fields import DEFAULT_DEPTH, order_of
from apps.lorebooks.services.groups import groups_filter
from apps.lorebooks.services.keys import RegexBudget
from apps.lorebooks.services.timed import TimedEffects

KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
PRUNE = True  # recursion rescans only the entries its new text can change (`may_change`); tests compare both
MISSED: dict[str, Any] = {"missed": True}  # the entry passed every rule but its keys did not hold
LORE_ORDER = ("chat", "persona", "character", "global")  # chat lore first, then persona lore, then the rest


@dataclass
class Book:
    name: str
    kind: str  # chat, persona, character or global
    entries: list[dict[str, Any]]
    card: bool = False  # the book inside a character's card, not one of the account's lorebooks


@dataclass
class Scanned:
    """What one scan is given besides the books."""

    messages: list[str]  # the chat's lines, newest first ("Name: text" when names are included)
    settings: Settings
    max_context: int
    count_tokens: Callable[[str], int]
    resolve: Callable[[str], str] = lambda text: text  # the macros ({{char}}, {{user}}) of keys and content
    trigger: str = "normal"
    globals: dict[str, str] = field(default_factory=dict)  # personaDescription, characterDescription, …
    character: str = ""  # the character's file name, for an entry's character filter
    character_tags: tuple[str, ...] = ()
    timed: dict[str, Any] = field(default_factory=dict)  # the chat's timedWorldInfo, changed in place
    dry_run: bool = False
    length: int | None = None  # the chat's messages the model sees, when `messages` holds only the newest
    rng: random.Random = field(default_factory=random.Random)
    # (book, uid) → relevance of the vectorized entries the chat matches by meaning (services/meaning.py): activated
    # as SillyTavern activates what its Vector Storage finds (an external activation, after the decorators)
    meaning: dict[tuple[str, Any], float] = field(default_factory=dict)


@dataclass
class Activation:
    entries: list[dict[str, Any]] = field(default_factory=list)  # activated, each with `world` and `why`
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    examples: list[tuple[str, str]] = field(default_factory=list)  # ("before" | "after", content)
    an_top: list[str] = field(default_factory=list)
    an_bottom: list[str] = field(default_factory=list)
    depth: list[dict[str, Any]] = field(default_factory=list)  # {"depth", "role", "entries"}
    outlets: dict[str, list[str]] = field(default_factory=dict)
    budget: int = 0
    overflowed: bool = False
    loops: int = 0
    regex: RegexBudget = field(default_factory=RegexBudget)
    told: RegexBudget = field(default_factory=RegexBudget)  # for telling where matched regex keys stand (why_key)
    timed_state: dict[str, Any] = field(default_factory=dict)
    timed_changed: bool = False


def _sort_key(entry: dict[str, Any]) -> float:
    return -order_of(entry)


def entries_sorted(books: list[Book], strategy: int) -> list[dict[str, Any]]:
    """The order SillyTavern tries entries in (`getSortedEntries`): chat lore, persona lore, then character and
    global lore by the strategy; within each, by `order`, highest first (a stable sort: ties keep the book's
    order, by uid)."""
    lore: dict[str, list[dict[str, Any]]] = {kind: [] for kind in LORE_ORDER}
    for book in books:
        lore[book.kind] += [dict(entry, world=book.name) for entry in book.entries]
    if strategy == 1:
        rest = sorted(lore["character"], key=_sort_key) + sorted(lore["global"], key=_sort_key)
    elif strategy == 2:
        rest = sorted(lore["global"], key=_sort_key) + sorted(lore["character"], key=_sort_key)
    else:
        rest = sorted(lore["global"] + lore["character"], key=_sort_key)
    ordered = sorted(lore["chat"], key=_sort_key) + sorted(lore["persona"], key=_sort_key) + rest
    for entry in ordered:
        entry["decorators"], entry["content"] = decorators_parse(entry.get("content") or "")
        if "hash" not in entry:  # the books' loader gives each entry its hash once (selectors.py)
            entry["hash"] = entry_hash(entry)
    return ordered


def entry_hash(entry: dict[str, Any]) -> str:
    """What a timed effect remembers its entry by: a change to the entry ends the effect, as in SillyTavern."""
    return hashlib.sha1(json.dumps(entry, sort_keys=True, default=str).encode()).hexdigest()[:16]


def decorators_parse(content: str) -> tuple[list[str], str]:
    """`@@activate` / `@@dont_activate` lines at the start of an entry's content, and the content without them."""
    if not content.startswith("@@"):
        return [], content
    lines = content.split("\n")
    decorators: list[str] = []
    fallback = False
    for n, line in enumerate(lines):
        if not line.startswith("@@"):
            return decorators, "\n".join(lines[n:])
        if line.startswith("@@@") and not fallback:
            continue
        bare = line[1:] if line.startswith("@@@") else line
        if bare.startswith(KNOWN_DECORATORS):
            decorators.append(bare)
            fallback = False
        else:
            fallback = True
    return decorators, content


def _never(entry: dict[str, Any], scanned: Scanned) -> bool:
    """Whether the entry is out of this whole build: disabled, not for this kind of generation, or filtered out
    for this character."""
    if entry.get("disable"):
        return True
    if entry.get("triggers") and scanned.trigger not in entry["triggers"]:
        return True
    wanted = entry.get("characterFilter") or {}
    if wanted.get("names") and (scanned.character in wanted["names"]) == bool(wanted.get("isExclude")):
        return True
    if wanted.get("tags") and scanned.character_tags:
        if bool(set(scanned.character_tags) & set(wanted["tags"])) == bool(wanted.get("isExclude")):
            return True
    return False


def _candidate(entry, *, buffer, state, scanned, timed, level, budget) -> dict[str, Any] | None:
    """Why `entry` activates in this loop, or None (the checks of SillyTavern's entry loop, in its order)."""
    settings = scanned.settings
    sticky = timed.is_active("sticky", entry)
    if timed.is_active("delay", entry) or (timed.is_active("cooldown", entry) and not sticky):
        return None
    delay = entry.get("delayUntilRecursion")
    if delay and not sticky and (state != RECURSION or (delay is not True and delay > level)):
        return None
    if state == RECURSION and settings.recursive and entry.get("excludeRecursion") and not sticky:
        return None
    if "@@activate" in entry["decorators"]:
        return {"why": "decorator"}
    if "@@dont_activate" in entry["decorators"]:
        return None
    relevance = scanned.meaning.get((entry["world"], entry["uid"]))
    if relevance is not None:
        return {"why": "meaning", "relevance": round(relevance, 2)}
    if entry.get("constant"):
        return {"why": "constant"}
    if sticky:
        return {"why": "sticky"}
    if not entry.get("key"):
        return None
    if not buffer.view(entry).may_hold(buffer.text(entry, state), every=False, budget=budget):
        return MISSED
    primary = next((key for key in entry["key"] if matches(buffer, entry, key, state, scanned, budget)), None)
    if primary is None:
        return MISSED
    secondary = entry.get("keysecondary") or []
    why = {"primary": scanned.resolve(primary).strip()}
    if not (entry.get("selective") and secondary):
        return why
    logic = entry.get("selectiveLogic") or 0
    any_found, all_found = False, True
    for key in secondary:
        found = matches(buffer, entry, key, state, scanned, budget)
        any_found, all_found = any_found or found, all_found and found
        if (logic == 0 and found) or (logic == 1 and not found):
            return why | {"secondary": scanned.resolve(key).strip(), "logic": logic}
    if (logic == 2 and not any_found) or (logic == 3 and all_found):
        return why | {"logic": logic}
    return MISSED


def scan(books: list[Book], scanned: Scanned) -> Activation:
    """The entries `books` activate for the chat in `scanned`, and where each goes (SillyTavern's `checkWorldInfo`
    and `getWorldInfoPrompt`)."""
    settings = scanned.settings
    result = Activation()
    budget = round(settings.budget * scanned.max_context / 100) or 1
    if settings.budget_cap > 0 and budget > settings.budget_cap:
        budget = settings.budget_cap
    result.budget = budget
    ordered = entries_sorted(books, settings.character_strategy)
    length = len(scanned.messages) if scanned.length is None else scanned.length
    timed = TimedEffects(scanned.timed, ordered, length, dry_run=scanned.dry_run)
    timed.check()
    if not ordered:
        return result
    buffer = Buffer(scanned)
    levels = sorted({1 if entry.get("delayUntilRecursion") is True else entry["delayUntilRecursion"]
                     for entry in ordered if entry.get("delayUntilRecursion")})  # fmt: skip
    level = levels.pop(0) if levels else 0
    index = {id(entry): n for n, entry in enumerate(ordered)}
    tried = [entry for entry in ordered if not _never(entry, scanned)]
    for entry in tried:
        entry["_key"] = f"{entry['world']}.{entry['uid']}"
    activated: dict[str, dict[str, Any]] = {}
    failed: set[int] = set()
    missed: dict[int, tuple[int, int]] = {}  # entries whose keys did not hold: (the skew, the recursion texts) then
    activated_text = ""
    state, count = INITIAL, 0
    while state:
        if settings.max_recursion_steps and settings.max_recursion_steps <= count:
            break
        count += 1
        next_state = NONE
        now: list[dict[str, Any]] = []
        for entry in tried:
            if id(entry) in failed or entry["_key"] in activated:
                continue
            if PRUNE and state == RECURSION and not may_change(entry, missed.get(id(entry)), buffer, result.regex):
                missed[id(entry)] = (buffer.skew, len(buffer.recurse))  # next time, only what is added after
                continue
            why = _candidate(entry, buffer=buffer, state=state, scanned=scanned, timed=timed, level=level,
                             budget=result.regex)  # fmt: skip
            if why is MISSED:
                if state != MIN_ACTIVATIONS and not buffer.view(entry).has_regex:
                    missed[id(entry)] = (buffer.skew, len(buffer.recurse))
                continue
            if why is not None:
                if "primary" in why:
                    why = why_key(buffer, entry, why["primary"], scanned, result.told) | why
                entry["why"] = why | ({"loop": count} if count > 1 else {})
                now.append(entry)
        if len(now) > 1:
            now.sort(key=lambda entry: (not timed.is_active("sticky", entry), index[id(entry)]))
        text_tokens = scanned.count_tokens(activated_text)
        scoring = functools.partial(score, buffer, state=state, scanned=scanned, budget=result.regex)
        groups_filter(now, activated, timed=timed, settings=settings, rng=scanned.rng, score=scoring)
        new_tokens = 0  # of this step's contents so far, each with its newline: counted entry by entry, not again
        ignoring = sum(1 for entry in now if entry.get("ignoreBudget"))
        for entry in now:
            ignoring -= 1 if entry.get("ignoreBudget") else 0
            if result.overflowed and not entry.get("ignoreBudget"):
                if ignoring > 0:
                    continue
                break
            chance = entry.get("probability")
            if entry.get("useProbability") and chance != 100 and not timed.is_active("sticky", entry):
                if chance is None or scanned.rng.random() * 100 > chance:  # none: JavaScript's `roll <= undefined`
                    failed.add(id(entry))
                    continue
            entry["content"] = scanned.resolve(entry["content"])
            new_tokens += scanned.count_tokens(entry["content"] + "\n")
            if not entry.get("ignoreBudget") and text_tokens + new_tokens >= budget:
                result.overflowed = True
                continue
            activated[entry["_key"]] = entry
        successful = [entry for entry in now if id(entry) not in failed]
        for_recursion = [entry for entry in successful if not entry.get("preventRecursion")]
        if settings.recursive and not result.overflowed and for_recursion:
            next_state = RECURSION
        if settings.recursive and not result.overflowed and state == MIN_ACTIVATIONS and buffer.recurse:
            next_state = RECURSION
        if not next_state and not result.overflowed and 0 < settings.min_activations > len(activated):
            over = settings.min_activations_depth_max > 0 and buffer.depth() > settings.min_activations_depth_max
            if not (over or buffer.depth() > length):
                next_state = MIN_ACTIVATIONS
                buffer.skew += 1
        if next_state == NONE and levels:
            next_state = RECURSION
            level = levels.pop(0)
        state = next_state
        if state:
            text = "\n".join(entry["content"] for entry in for_recursion)
            if text:
                buffer.recurse.append(text)
                activated_text = text + "\n" + activated_text
    result.loops = count
    result.entries = list(activated.values())
    _place(result, result.entries)
    timed.set(list(activated.values()))
    return result


def _place(result: Activation, activated: list[dict[str, Any]]) -> None:
    """Each activated entry in its position: by `order`, lowest first, nearer the chat the higher (SillyTavern
    sorts highest first and puts each one in front)."""
    for entry in sorted(activated, key=_sort_key):
        content = entry["content"]
        if not content:
            continue
        position = entry.get("position")  # none: activated (budget, recursion) but placed nowhere, as in SillyTavern
        if position in (0, 1, 2, 3):
            [result.before, result.after, result.an_top, result.an_bottom][position].insert(0, content)
        elif position in (5, 6):
            result.examples.insert(0, ("before" if position == 5 else "after", content))
        elif position == 4:
            depth = DEFAULT_DEPTH if entry.get("depth") is None else entry["depth"]
            role = entry.get("role") or 0
            group = next((g for g in result.depth if g["depth"] == depth and g["role"] == role), None)
            if group is None:
                result.depth.append({"depth": depth, "role": role, "entries": [content]})
            else:
                group["entries"].insert(0, content)
        elif position == 7 and entry.get("outletName"):
            result.outlets.setdefault(entry["outletName"], []).append(content)
