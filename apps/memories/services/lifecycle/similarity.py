"""Similarity measures and wording cues the classifier decides on."""

from __future__ import annotations

import re

_WORD = re.compile(r"[\w']+")
STOPWORDS = frozenset(
    "a an the and or but of to in on at by for with from as is are was were be been being it its this that these "
    "those he she they them his her their him i you we our your my me us has have had do does did not so very "
    "just also then than there here who whom which what when where while".split()
)
# Wording that says a state changed (Smart Memory's supersession cue, docs/GLOSSARY.md): the new memory replaces
# the old one without asking the model.
STATE_CHANGE = re.compile(
    r"\b(no longer|not any ?more|anymore|any more|became|become|becomes|has become|have become|is now|are now|"
    r"was now|now (?:lives|works|owns|has|hates|loves|trusts|believes|knows|is|wears|carries|leads|rules)|"
    r"stopped|started to|used to|changed|moved (?:to|into|out)|quit|resigned|lost (?:her|his|their|the)|"
    r"broke up|married|divorced|died|was killed|recovered|healed|switched|turned into|promoted|demoted|"
    r"replaced|instead of|gave up|abandoned|betrayed|fell out)\b",
    re.IGNORECASE,
)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def jaccard(a: str, b: str) -> float:
    left, right = words(a), words(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def state_change_cue(text: str) -> str:
    """The state-change wording in `text`, or ""."""
    match = STATE_CHANGE.search(text)
    return match.group(0).lower() if match else ""
