"""How an entry's key matches the text scanned, as SillyTavern 1.19.0 matches it (docs/LOREBOOKS.md, "Keys").

- A key written `/pattern/flags` is a regular expression, tested on the text as it is (its own `i` flag decides
  case). SillyTavern's rule for what counts as one is kept: the pattern may not hold an unescaped `/`.
- Any other key is plain text: both sides lower-cased unless the entry is case-sensitive; with whole words, a
  one-word key must stand between non-word characters (JavaScript's `\\W`: anything but ASCII letters, digits and
  `_`), and a key of several words is found anywhere.

Regular expressions run in the `regex` package, which stops a match after a time-out: a key like `/(a+)+$/` on a
long message cannot hold a build. Every regex test is also counted against the build's own allowance
(`RegexBudget`); when it is spent, the remaining regex keys of the build do not match, and the build says so.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import lru_cache

import regex

_DELIMITED = re.compile(r"^/([\w\W]+?)/([gimsuy]*)$")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}
PER_TEST_SECONDS = 0.05
PER_BUILD_SECONDS = 0.25


class KeyError_(Exception):  # noqa: N801 — not the builtin KeyError
    """A `/…/` key that looks like a regular expression and does not compile."""


@dataclass(frozen=True)
class Pattern:
    compiled: regex.Pattern
    sticky: bool  # the y flag: a match only where the scan starts


@lru_cache(maxsize=4096)
def key_compile(key: str) -> Pattern | None:
    """The compiled regular expression of a `/…/flags` key, None for a plain key. Raises KeyError_ for a key
    SillyTavern would take as a regex (it is delimited and its pattern has no unescaped `/`) that fails to compile:
    SillyTavern quietly treats it as never matching, Lorekeeper refuses it at import."""
    match = _DELIMITED.match(key)
    if not match:
        return None
    pattern, flags = match.groups()
    if _UNESCAPED_SLASH.search(pattern):
        return None  # SillyTavern then matches the key as plain text
    pattern = pattern.replace("\\/", "/", 1)  # as String.replace with a string: the first one only
    options = 0
    for flag in flags:
        options |= _FLAGS.get(flag, 0)
    try:
        return Pattern(regex.compile(pattern, options | regex.VERSION0), "y" in flags)
    except (regex.error, OverflowError, RecursionError) as error:
        raise KeyError_(str(error)) from None


_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _whole_word(text: str, key: str) -> bool:
    """`(?:^|\\W)key(?:$|\\W)` as JavaScript reads it, by `str.find`: each place the key stands, checked for a
    non-word character (or the text's edge) on both sides. A key absent from the text costs one substring search."""
    start = text.find(key)
    while start != -1:
        end = start + len(key)
        if (start == 0 or text[start - 1] not in _WORD_CHARS) and (end == len(text) or text[end] not in _WORD_CHARS):
            return True
        start = text.find(key, start + 1)
    return False


@dataclass
class RegexBudget:
    """The time regular-expression keys may take in one build, and what they took."""

    seconds: float = PER_BUILD_SECONDS
    spent: float = 0.0
    tests: int = 0
    timed_out: list[str] = field(default_factory=list)
    exhausted: bool = False

    def test(self, pattern: Pattern, key: str, text: str) -> bool:
        if self.exhausted:
            return False
        left = min(PER_TEST_SECONDS, self.seconds - self.spent)
        started = time.perf_counter()
        try:
            found = (pattern.compiled.match if pattern.sticky else pattern.compiled.search)(text, timeout=left)
        except TimeoutError:
            found = None
            if key not in self.timed_out:
                self.timed_out.append(key)
        self.spent += time.perf_counter() - started
        self.tests += 1
        if self.spent >= self.seconds:
            self.exhausted = True
        return found is not None


_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")


class Haystack:
    """The text an entry scans, with what matching needs of it made once: its lower-cased form, and the runs of
    word characters in each (a one-word key made of word characters stands as a whole word exactly when it is one
    of those runs, a set lookup)."""

    __slots__ = ("text", "_lower", "_words", "_words_lower")

    def __init__(self, text: str):
        self.text = text
        self._lower = self._words = self._words_lower = None

    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    def words(self, lowered: bool) -> set[str]:
        if lowered:
            if self._words_lower is None:
                self._words_lower = set(_WORD_RUN.findall(self.lower()))
            return self._words_lower
        if self._words is None:
            self._words = set(_WORD_RUN.findall(self.text))
        return self._words


@lru_cache(maxsize=16384)
def plain_kind(key: str, case_sensitive: bool, whole_words: bool) -> tuple[str, str]:
    """How a plain key is looked for: ("word", key) as a run of word characters, ("whole", key) as a whole word
    by its edges, ("in", key) anywhere; the key lower-cased unless case-sensitive."""
    if not case_sensitive:
        key = key.lower()
    if whole_words and len(key.split()) <= 1:
        return ("word" if all(char in _WORD_CHARS for char in key) else "whole"), key
    return "in", key


def key_matches(haystack: Haystack, key: str, *, case_sensitive: bool, whole_words: bool, budget: RegexBudget) -> bool:
    """Whether `key` (already trimmed, its macros resolved) is found in the scanned text."""
    try:
        pattern = key_compile(key)
    except KeyError_:
        return False  # as SillyTavern: a regex that does not compile matches nothing
    if pattern is not None:
        return budget.test(pattern, key, haystack.text)
    how, key = plain_kind(key, case_sensitive, whole_words)
    if how == "word":
        return key in haystack.words(not case_sensitive)
    text = haystack.text if case_sensitive else haystack.lower()
    return _whole_word(text, key) if how == "whole" else key in text
