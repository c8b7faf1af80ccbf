"""A history that leaves out or adds messages amid the chat along with other changes (another block left out or
shown again, a message edited or spaced otherwise, the last reply regenerated), read message by message against the
chat: which of its messages are the chat's, which edit one, which of the chat's are deleted and which are added or
new. Only those are then written (services/sync.py), the chat's other messages kept as they are: their swipes,
recalls and extension data.

The two are aligned in two steps, each of bounded cost whatever the history:
- anchors: the messages said once in the history and once in the chat (by speaker and digest), the longest run of
  them in the same order on both sides (patience sorting: n log n);
- between two anchors, each of the history's messages is paired with one of the chat's, the same speaker, in order,
  the chat's left unpaired being deleted, choosing the pairs that agree most: the same digest, else the same words
  spaced otherwise, else the most words shared (an edit keeps most of its words; this tells "#20 deleted, #22
  edited" from "#20 edited, #21 and #22 deleted"). Where the history says more messages there than the chat
  (messages hidden in the front end, then shown again), each of the chat's is paired with one of the history's
  instead, those of the history left unpaired being added there. At most ALIGNED_CELLS pairs are weighed in all.
A reading is given only where it is one a person makes in a front end: messages deleted amid the chat or added
amid it (at least one, with a message of the chat kept before it, and after it), messages edited in place, new
messages at the end, and no more messages deleted, added or edited than agree."""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from apps.chats.selectors import HistoryDigests
from apps.gateway.services.placing import DIGESTS
from apps.gateway.services.request import Line, said, words

# The messages of each side read, past the start they share, at most; and the pairs of messages weighed between
# anchors, in all (a chat whose every turn is "ok" has few anchors): past either, the comparison alone reads the
# history (services/sync.py).
ALIGNED_MOST = 20_000  # a request's messages, at most (services/request.py MAX_MESSAGES)
ALIGNED_CELLS = 20_000
SAME = 2.0  # a pair's weight when its texts agree (by digest, or but for spacing); otherwise the words shared, 0-1


@dataclass
class Reading:
    """The history against the chat (positions in `stored.indices`): `held[n]` the chat's message the history's
    message n is (None: new), `edited` the history's positions whose words differ from the chat's there, `spaced`
    those whose text differs only in its spacing (not an edit), `gone` the chat's positions deleted, `added` the
    history's positions added amid the chat (the others held None are new at its end), `regenerate` the chat's
    last reply left out to be written again (not deleted)."""

    held: list[int | None]
    edited: list[int] = field(default_factory=list)
    spaced: list[int] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    regenerate: bool = False


class _Texts:
    """The words of both sides' messages, as the pairs between anchors need them: the history's from its lines, the
    chat's read once for all the positions asked (`read`: stored positions -> their texts)."""

    def __init__(self, history: list[Line], read: Callable[[list[int]], dict[int, str]]) -> None:
        self.history, self.read = history, read
        self.ours: dict[int, str] = {}
        self.said: dict[tuple[str, int], str] = {}
        self.words: dict[tuple[str, int], frozenset[str]] = {}

    def load(self, positions: list[int]) -> None:
        missing = [p for p in positions if p not in self.ours]
        if missing:
            self.ours.update(self.read(missing))

    def weight(self, i: int, j: int) -> float:
        theirs, ours = self._said("t", i), self._said("o", j)
        if theirs == ours:
            return SAME
        a, b = self._words("t", i), self._words("o", j)
        return len(a & b) / len(a | b) if a or b else 0.0

    def _said(self, side: str, n: int) -> str:
        key = (side, n)
        if key not in self.said:
            self.said[key] = said(self.history[n].content if side == "t" else self.ours.get(n, ""))
        return self.said[key]

    def _words(self, side: str, n: int) -> frozenset[str]:
        key = (side, n)
        if key not in self.words:
            self.words[key] = words(self.history[n].content if side == "t" else self.ours.get(n, ""))
        return self.words[key]


def aligned(
    history: list[Line],
    stored: HistoryDigests,
    same: int,
    *,
    answered: bool,
    read: Callable[[list[int]], dict[int, str]],
) -> Reading | None:
    """The history read against the chat, its first `same` messages the chat's (module docstring); None where it
    is not such a reading. A history ending with the person's message is read first as a regenerate (it ends where
    the chat's last reply was, as the comparison reads one), then as it is, then as their new turn after what the
    chat ends with."""
    if not stored.indices:
        return None
    ours = [stored.speakers[p] + stored.md5[32 * p : 32 * p + 32] for p in range(len(stored.indices))]
    theirs = [("u" if line.role == "user" else "a") + DIGESTS.of(line.content) for line in history]
    texts = _Texts(history, read)
    turn = not answered and history[-1].role == "user"
    if turn and ours[-1][0] == "a" and len(ours) > 1:
        reading = _read(ours[:-1], theirs, same, texts)
        if reading is not None and reading.held[-1] == len(ours) - 2:
            reading.regenerate = True
            return reading
    reading = _read(ours, theirs, same, texts)
    if reading is None and turn and len(theirs) > 1:
        reading = _read(ours, theirs[:-1], same, texts)
        if reading is not None:
            reading.held.append(None)
    return reading


def _anchors(ours: list[str], theirs: list[str], start: int) -> list[tuple[int, int]]:
    """(history position, chat position) of the messages said once on each side past `start`, the longest run of
    them in the same order on both."""
    once_ours, once_theirs = Counter(ours[start:]), Counter(theirs[start:])
    where = {item: j for j, item in enumerate(ours[start:], start) if once_ours[item] == 1}
    pairs = [(i, where[item]) for i, item in enumerate(theirs[start:], start)
             if once_theirs[item] == 1 and item in where]  # fmt: skip
    # Patience sorting: `ends[k]` the smallest chat position a run of k + 1 can end at, `before` each pair's link.
    ends: list[int] = []
    tails: list[int] = []
    before: list[int] = []
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(ends, j)
        before.append(tails[k - 1] if k else -1)
        if k == len(ends):
            ends.append(j)
            tails.append(n)
        else:
            ends[k], tails[k] = j, n
    run, n = [], tails[-1] if tails else -1
    while n >= 0:
        run.append(pairs[n])
        n = before[n]
    return run[::-1]


def _paired(them: list[int], us: list[int], theirs: list[str], ours: list[str], texts: _Texts, *, end: bool):
    """Each of `them` (history positions) paired with one of `us` (chat positions), in order and the same speaker,
    the pairs agreeing most (module docstring); where `them` outnumber `us` (not at the end), each of `us` paired
    with one of `them` instead. None when no such pairing is. At the `end` (no anchor after them), only messages
    sharing words pair: a message there sharing none with the chat's is new, not an edit."""

    def weight(i: int, j: int) -> float | None:
        if theirs[i][0] != ours[j][0]:
            return None
        agree = SAME if theirs[i] == ours[j] else texts.weight(i, j)
        return agree if agree > 0 or not end else None

    if len(them) > len(us):
        pairs = _matched(us, them, lambda j, i: weight(i, j))
        return None if pairs is None else [(i, j) for j, i in pairs]
    return _matched(them, us, weight)


def _matched(rows: list[int], cols: list[int], weight: Callable[[int, int], float | None]):
    """Each of `rows` paired with one of `cols`, in order, the pairs' weights (None: they may not pair) the most in
    sum; the `cols` left unpaired. None when no such pairing is."""
    none = float("-inf")
    best = [[0.0] * (len(cols) + 1)] + [[none] * (len(cols) + 1) for _ in rows]
    for a, b in itertools.product(range(1, len(rows) + 1), range(1, len(cols) + 1)):
        best[a][b] = best[a][b - 1]  # col b left unpaired
        if best[a - 1][b - 1] > none and (agree := weight(rows[a - 1], cols[b - 1])) is not None:
            best[a][b] = max(best[a][b], best[a - 1][b - 1] + agree)
    if best[-1][-1] == none:
        return None
    pairs, a, b = [], len(rows), len(cols)
    while a:
        if best[a][b] == best[a][b - 1]:
            b -= 1
        else:
            pairs.append((rows[a - 1], cols[b - 1]))
            a, b = a - 1, b - 1
    return pairs[::-1]


def _read(ours: list[str], theirs: list[str], same: int, texts: _Texts) -> Reading | None:
    start = min(same, len(ours), len(theirs))
    if max(len(ours), len(theirs)) - start > ALIGNED_MOST:
        return None
    anchors = _anchors(ours, theirs, start)
    bounds = [(start - 1, start - 1), *anchors, (len(theirs), len(ours))]
    gaps = []
    for (i0, j0), (i1, j1) in itertools.pairwise(bounds):
        them, us = list(range(i0 + 1, i1)), list(range(j0 + 1, j1))
        if i1 == len(theirs):  # the end: what the history says past the chat's messages is new
            them = them[: len(us)]
        gaps.append((them, us))
    if sum(len(them) * len(us) for them, us in gaps) > ALIGNED_CELLS:
        return None
    texts.load([j for them, us in gaps if them for j in us])
    reading = Reading(held=[*range(start), *[None] * (len(theirs) - start)])
    for i, j in anchors:
        reading.held[i] = j
    for n, (them, us) in enumerate(gaps, start=1):
        pairs = _paired(them, us, theirs, ours, texts, end=n == len(gaps)) if them else []
        if pairs is None:
            return None
        for i, j in pairs:
            reading.held[i] = j
            if theirs[i] != ours[j]:
                (reading.spaced if texts.weight(i, j) == SAME else reading.edited).append(i)
        paired = {j for _, j in pairs}
        reading.gone += [j for j in us if j not in paired]
        if n < len(gaps):
            paired = {i for i, _ in pairs}
            reading.added += [i for i in them if i not in paired]
    reading.gone.sort()
    reading.edited.sort()
    edits = len(reading.edited)
    kept = sorted(j for j in reading.held if j is not None)
    first = next((i for i, j in enumerate(reading.held) if j is not None), len(theirs))
    amid = any(kept and kept[0] < j < kept[-1] for j in reading.gone) or reading.added
    if not amid or (reading.added and reading.added[0] < first):
        return None
    if len(reading.gone) + len(reading.added) + edits > len(kept) - edits:
        return None
    return reading
