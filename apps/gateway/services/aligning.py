"""A history that leaves out messages amid the chat along with other changes (another block left out, a message
edited, the last reply regenerated), read message by message against the chat: which of its messages are the
chat's, which edit one, which the chat's are deleted and which are new. Only those are then written
(services/sync.py), the chat's other messages kept as they are: their swipes, recalls and extension data.

The two are aligned by their speakers and digests (difflib's longest matching blocks) between the start and the end
they share. A reading is given only where it is one a person makes in a front end: messages deleted amid the chat
(at least one, with at least one message agreeing before them), messages edited in place (the same speaker), new
messages at the end only, and no more messages deleted or edited than agree."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from apps.chats.selectors import HistoryDigests
from apps.gateway.services.placing import DIGESTS
from apps.gateway.services.request import Line

# The messages of each side aligned, between the start and the end they share, at most; and the pairs of equal
# items the alignment may weigh (a message repeated on both sides, "ok" or "...", is weighed against each of its
# repeats): past either, the history is read by the comparison alone.
ALIGNED_MOST = 5_000
ALIGNED_PAIRS = 200_000


@dataclass
class Reading:
    """The history against the chat (positions in `stored.indices`): `held[n]` the chat's message the history's
    message n is (None: new), `edited` the history's positions whose message edits the chat's there, `gone` the
    chat's positions deleted, `regenerate` the chat's last reply left out to be written again (not deleted)."""

    held: list[int | None]
    edited: list[int] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)
    regenerate: bool = False


def _items(history: list[Line]) -> list[str]:
    return [("u" if line.role == "user" else "a") + DIGESTS.of(line.content) for line in history]


def _speakers(items: list[str]) -> str:
    return "".join(item[0] for item in items)


def _shared_end(ours: list[str], theirs: list[str], start: int) -> int:
    """How many of the last items of the two agree (the first `start` of each aside)."""
    count = 0
    while count < min(len(ours), len(theirs)) - start and ours[-1 - count] == theirs[-1 - count]:
        count += 1
    return count


def aligned(history: list[Line], stored: HistoryDigests, same: int, *, answered: bool) -> Reading | None:
    """The history read against the chat, its first `same` messages the chat's (module docstring); None where it
    is not such a reading. A history ending with the person's message is read first as a regenerate (it ends where
    the chat's last reply was, as the comparison reads one), then as it is, then as their new turn after what the
    chat ends with."""
    if not same:
        return None
    ours = [stored.speakers[p] + stored.md5[32 * p : 32 * p + 32] for p in range(len(stored.indices))]
    theirs = _items(history)
    turn = not answered and history[-1].role == "user"
    if turn and ours[-1][0] == "a":
        reading = _read(ours[:-1], theirs, same)
        if reading is not None and reading.held[-1] == len(ours) - 2:
            reading.regenerate = True
            return reading
    reading = _read(ours, theirs, same)
    if reading is None and turn and len(theirs) > same + 1:
        reading = _read(ours, theirs[:-1], same)
        if reading is not None:
            reading.held.append(None)
    return reading


def _read(ours: list[str], theirs: list[str], same: int) -> Reading | None:
    end = _shared_end(ours, theirs, same)
    middle_ours, middle_theirs = ours[same : len(ours) - end], theirs[same : len(theirs) - end]
    if max(len(middle_ours), len(middle_theirs)) > ALIGNED_MOST:
        return None
    counted = Counter(middle_ours)
    if sum(counted[item] for item in middle_theirs) > ALIGNED_PAIRS:
        return None
    reading = Reading(held=[*range(same), *[None] * (len(theirs) - same)])
    matcher = SequenceMatcher(None, middle_theirs, middle_ours, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        i1, i2, j1, j2 = i1 + same, i2 + same, j1 + same, j2 + same
        if tag == "equal":
            reading.held[i1:i2] = range(j1, j2)
        elif tag == "insert":  # messages of the chat's the history leaves out
            reading.gone += range(j1, j2)
        elif tag == "replace" and i2 - i1 == j2 - j1 and _speakers(theirs[i1:i2]) == _speakers(ours[j1:j2]):
            reading.held[i1:i2] = range(j1, j2)
            reading.edited += range(i1, i2)
        elif tag != "delete" or i2 != len(theirs) - end or j1 != len(ours):  # "delete": the history's own
            return None  # a message inserted amid the chat, or several read as fewer: not a person's edits
    reading.held[len(theirs) - end :] = range(len(ours) - end, len(ours))
    agree = sum(index is not None for index in reading.held) - len(reading.edited)
    kept_after = max([index for index in reading.held if index is not None])
    if not any(p < kept_after for p in reading.gone) or len(reading.gone) + len(reading.edited) > agree:
        return None
    return reading
