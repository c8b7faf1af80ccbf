"""Scene-break heuristics (T2, docs/GLOSSARY.md): an explicit marker, a jump in time, a move to another place, or a
change of who is present. They propose; the minimum scene length (and, when the user turns it on, the model's yes/no)
dispose."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.extraction.services.transcript import Line

# A line's own spaces before a marker (`[^\S\n]`), and spaces before a word only after its "[": `^\s*` and `\[?\s*`
# from each line's start ran on through every blank line after it, each split of them tried, and a message of 2,000
# newlines took minutes.
MARKER = re.compile(
    r"^[^\S\n]*(?:(?:\*\s*){3,}|(?:-\s*){3,}|(?:=\s*){3,}|(?:~\s*){3,}|#{1,3}\s+\S|"
    r"(?:\[\s*)?(?:scene(?:\s+break)?|chapter|time\s*skip|interlude|part)\b[\s\d:.\]-])",
    re.IGNORECASE | re.MULTILINE,
)
TIME = re.compile(
    r"\b(?:the\s+(?:next|following)\s+(?:morning|day|evening|night|week|dawn|afternoon)"
    r"|(?:hours|days|weeks|months|years|a\s+day|an\s+hour|a\s+week|a\s+month|a\s+year)\s+later"
    r"|later\s+that\s+(?:day|night|evening|morning|afternoon)"
    r"|(?:several|a\s+few|some)\s+(?:hours|days|weeks|months)\s+(?:later|passed|went\s+by)"
    r"|by\s+(?:nightfall|the\s+next\s+morning|dawn\s+the\s+next\s+day)"
    r"|meanwhile|time\s+passe[sd])\b",
    re.IGNORECASE,
)
PLACE_VERB = (
    r"(?:arriv(?:e|es|ed|ing)\s+(?:at|in)|reach(?:es|ed)?|enter(?:s|ed)?|"
    r"step(?:s|ped)?\s+(?:into|inside)|walk(?:s|ed)?\s+into|made\s+(?:his|her|their|our|my)\s+way\s+(?:to|into)|"
    r"head(?:s|ed)?\s+(?:to|for|into)|back\s+(?:at|in)|return(?:s|ed)?\s+to|set\s+out\s+for|"
    r"travel(?:s|led|ed)?\s+to|rode\s+(?:to|into)|sail(?:s|ed)?\s+(?:to|into))"
)
PLACE = re.compile(
    PLACE_VERB + r"\s+(?:the\s+|a\s+|an\s+)?(?P<place>(?:[A-Za-z][\w'-]*)(?:\s+(?:of\s+)?[A-Z][\w'-]*){0,3})",
)
LEAVES = re.compile(
    r"\b(?P<name>[A-Z][a-z]+)\s+(?:leaves|left|departs|departed|walks\s+out|walked\s+out|storms\s+off|stormed\s+off)\b"
)
ROOM_WORDS = {"room", "door", "hall", "it", "them", "him", "her", "view", "conversation"}


@dataclass
class SceneState:
    """What the current scene looks like so far: its place and who has spoken in it."""

    start: int
    place: str = ""
    speakers: set[str] = field(default_factory=set)

    def absorb(self, line: Line) -> None:
        place = place_of(line.text)
        if place and not self.place:
            self.place = place
        if not line.is_user and line.name:
            self.speakers.add(line.name)


def place_of(text: str) -> str:
    match = PLACE.search(text)
    if not match:
        return ""
    place = match["place"].strip().lower()
    return "" if place in ROOM_WORDS else place


def cue(line: Line, scene: SceneState, *, group: bool) -> str:
    """Why a new scene may begin at `line`, or "" when nothing suggests it."""
    if MARKER.search(line.text):
        return "marker"
    found = TIME.search(line.text)
    if found:
        return f"time: “{found.group(0)}”"
    place = place_of(line.text)
    if place and scene.place and place != scene.place:
        return f"place: {scene.place} → {place}"
    if group and not line.is_user and line.name and scene.speakers and line.name not in scene.speakers:
        return f"cast: {line.name} joins"
    return ""


def departure(line: Line, scene: SceneState) -> str:
    """A character of the scene leaving ends it: the next message begins another."""
    left = LEAVES.search(line.text)
    return f"cast: {left['name']} left" if left and left["name"] in scene.speakers else ""


def find_break(
    history: list[Line], candidates: list[Line], *, scene_start: int, min_length: int, group: bool
) -> tuple[Line, str] | None:
    """The first message of `candidates` (those not yet checked) that opens a new scene, at least `min_length`
    messages after `scene_start`; `history` is the current scene before them (to know its place and cast)."""
    scene = SceneState(scene_start)
    for line in history:
        scene.absorb(line)
    left = ""
    for line in candidates:
        reason = (cue(line, scene, group=group) or left) if line.index - scene_start >= min_length else ""
        if reason:
            return line, reason
        left = departure(line, scene)
        scene.absorb(line)
    return None
