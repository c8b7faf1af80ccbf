"""A history that leaves out or adds messages amid the chat along with other changes (another block left out or
shown again, a message edited or spaced otherwise, the last reply regenerated), read message by message against the
chat: which of its messages are the chat's, which edit one, which of the chat's are deleted, which of its hidden
ones are shown again, and which are added or new. Only those are then written (services/sync.py), the chat's other
messages kept as they are: their swipes, recalls and extension data.

The chat's messages are read with those it hides from the model (`is_system`: hidden by the gateway in a guessed
chat, on the chat page, or by SillyTavern's extension) in their places, so that a history showing them again finds
them. The two are aligned in two steps, each of bounded cost whatever the history:
- anchors: the messages said once in the history and once in the chat (by speaker and digest), the longest run of
  them in the same order on both sides (patience sorting: n log n);
- between two anchors, the pairs of the history's messages and the chat's, the same speaker, in order, that agree
  most: the same digest (2), else the same words spaced otherwise (2), else the share of the shorter one's words
  the other says, then of all their words (an edit keeps most of its words, or adds to them; this tells "#20
  deleted, #22 edited" from "#20 edited, #21 and #22 deleted", and "ok" from "ok, go north" edited), each message
  of either side left unpaired costing 1: the chat's are deleted, the history's added. A hidden message pairs only
  with the history saying it (shown again), and left unpaired costs nothing (it stays hidden). After the last
  anchor, a pair shares words, and the history's messages past the last pair are new. At most ALIGNED_CELLS pairs
  are weighed in all.
A reading is given only where it is one a person makes in a front end: messages deleted amid the chat, added amid
it or shown again (at least one, with a message of the chat kept before it), messages edited in place, new messages
at the end, no more messages deleted, added or edited than agree, and no more of the chat's messages moved by the
messages added than ADDED_MOVES. A chat named by the request (the header) deletes what the front end hides, so
holds no trace of it: shown again next to messages left out, those read as edited into its texts (the texts end
right; the swipes stand under the others' words)."""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
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
KEPT = 0.9  # of the words shared's weight, the share of the shorter message's words; the rest, the share of all


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
    shown: list[tuple[int, int]] = field(default_factory=list)
    regenerate: bool = False


class _Texts:
    """The words of both sides' messages, as the pairs between anchors need them: the history's from its lines, the
    chat's read once for all the messages asked (`read`: the chat's indices -> their texts)."""

    def __init__(self, history: list[Line], read: Callable[[list[int]], dict[int, str]]) -> None:
        self.history, self.read = history, read
        self.ours: dict[int, str] = {}
        self.said: dict[tuple[str, int], str] = {}
        self.words: dict[tuple[str, int], frozenset[str]] = {}

    def load(self, indices: list[int]) -> None:
        missing = [index for index in indices if index not in self.ours]
        if missing:
            self.ours.update(self.read(missing))

    def weight(self, i: int, j: int) -> float:
        theirs, ours = self._said("t", i), self._said("o", j)
        if theirs == ours:
            return SAME
        a, b = self._words("t", i), self._words("o", j)
        if not (a and b):
            return 0.0
        shared = len(a & b)  # of the shorter's words (an edit adds to them), then of all (a short one alike says less)
        return KEPT * shared / min(len(a), len(b)) + (1 - KEPT) * shared / len(a | b)

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
    hidden: Sequence[tuple[int, str]] = (),
) -> Reading | None:
    """The history read against the chat, its first `same` messages the chat's (module docstring); None where it
    is not such a reading. `hidden`: the chat's messages hidden from the model past them, (index, speaker and
    digest) in order, which the history may show again. A history ending with the person's message is read first
    as a regenerate (it ends where the chat's last reply was, as the comparison reads one, perhaps with messages
    added before that reply), then as it is, then as their new turn after what the chat ends with."""
    if not stored.indices:
        return None
    ours = [stored.speakers[p] + stored.md5[32 * p : 32 * p + 32] for p in range(len(stored.indices))]
    theirs = [("u" if line.role == "user" else "a") + DIGESTS.of(line.content) for line in history]
    texts = _Texts(history, read)
    turn = not answered and history[-1].role == "user"
    if turn and ours[-1][0] == "a" and len(ours) > 1:
        last = stored.indices[-1]  # the reply regenerated: what the history says is before it
        before = [row for row in hidden if row[0] < last]
        reading = _read(ours[:-1], theirs, same, texts, stored.indices, before, end=False)
        # The history ends where the chat's last reply was, or with hidden messages before it shown again (messages
        # it adds there may as well be the last reply edited and the person's new turn: the plain reading).
        after = reading.held.index(len(ours) - 2) if reading is not None and len(ours) - 2 in reading.held else None
        if after is not None and {n for n, _ in reading.shown} >= set(range(after + 1, len(theirs))):
            reading.regenerate = True
            return reading
    reading = _read(ours, theirs, same, texts, stored.indices, hidden)
    if reading is None and turn and len(theirs) > 1:
        reading = _read(ours, theirs[:-1], same, texts, stored.indices, hidden)
        if reading is not None:
            reading.held.append(None)
    return reading


def _anchors(ours: list[str], theirs: list[str]) -> list[tuple[int, int]]:
    """(history position, chat position) of the messages said once on each side, the longest run of them in the
    same order on both."""
    once_ours, once_theirs = Counter(ours), Counter(theirs)
    where = {item: j for j, item in enumerate(ours) if once_ours[item] == 1}
    pairs = [(i, where[item]) for i, item in enumerate(theirs) if once_theirs[item] == 1 and item in where]
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


LEFT = -1.0  # a message of either side left unpaired between anchors: one of the chat's deleted, or one added


def _paired(
    them: list[int], us: list[int], hidden: list[bool], weight: Callable[[int, int], float | None], *, end: bool
) -> list[tuple[int, int]]:
    """The pairs of `them` (history positions) and `us` (the chat's, places in `_read`'s `seq`) in order whose
    weights (None: they may not pair) with LEFT for each message of either side left unpaired sum the most: the
    chat's left are deleted, the history's added. A hidden message of the chat's left unpaired costs nothing: it
    stays hidden. At the `end` (no anchor after them), the history's messages past the last pair cost nothing:
    they are new. A pair weighs at least 0, so an edit is read before a message deleted and another added."""
    left = [0.0 if hidden[s] else LEFT for s in us]
    best = [[0.0] * (len(us) + 1) for _ in range(len(them) + 1)]
    for b in range(1, len(us) + 1):
        best[0][b] = best[0][b - 1] + left[b - 1]
    for a in range(1, len(them) + 1):
        row, above = best[a], best[a - 1]
        row[0] = above[0] + LEFT
        for b in range(1, len(us) + 1):
            score = max(above[b] + LEFT, row[b - 1] + left[b - 1])
            agree = weight(them[a - 1], us[b - 1])
            if agree is not None:
                score = max(score, above[b - 1] + agree)
            row[b] = score
    rows = len(them)
    if end:  # the history's last messages new: the most, the fewest paired on ties (one left unpaired costs LEFT)
        rows = max(range(len(them) + 1), key=lambda a: (best[a][len(us)], -a))
    pairs, a, b = [], rows, len(us)
    while a and b:  # on a tie, the later messages left unpaired: those of both sides pair as early as they may
        if best[a][b] == best[a][b - 1] + left[b - 1]:
            b -= 1
        elif best[a][b] == best[a - 1][b] + LEFT:
            a -= 1
        else:
            pairs.append((them[a - 1], us[b - 1]))
            a, b = a - 1, b - 1
    return pairs[::-1]


# The chat's messages a reading's runs of messages added amid it move, at most, counted once for each run (each run is
# written apart, and moves the chat's messages after it): past it, the comparison alone reads the history.
ADDED_MOVES = 20_000
HIDDEN_BACK = 50  # messages of the first `same` read again where the chat's hidden messages stand among them


def _read(
    ours: list[str],
    theirs: list[str],
    same: int,
    texts: _Texts,
    indices: list[int],
    hidden: Sequence[tuple[int, str]],
    *,
    end: bool = True,
) -> Reading | None:
    """The reading of `theirs` against `ours` past their first `same` (module docstring), the chat's `hidden`
    messages among its own in their places. `end` False: the chat goes on after `ours` (its last reply, left out to
    be regenerated), so nothing the history says past them is new: it is added before what follows."""
    start = min(same, len(ours), len(theirs))
    back = max(0, start - HIDDEN_BACK)
    if start and any(index < indices[start - 1] for index, _ in hidden if index > (indices[back - 1] if back else -1)):
        start = back  # (the first `same` agree by their digests: "ok" and "..." may stand for hidden ones)
    if max(len(ours), len(theirs)) - start > ALIGNED_MOST:
        return None
    # The chat past `start` in its order: its messages' positions in `ours`, its hidden ones as -1 - k (`hidden`).
    low = indices[start - 1] if start else -1
    shown = [(index, digest) for index, digest in hidden if index > low]
    places = sorted([*[(indices[p], p) for p in range(start, len(ours))],
                     *[(index, -1 - k) for k, (index, _) in enumerate(shown)]])  # fmt: skip
    seq = [j for _, j in places]
    chat = [ours[j] if j >= 0 else shown[-1 - j][1] for j in seq]  # speaker and digest
    kinds = [j < 0 for j in seq]  # hidden
    anchors = [(start + i, s) for i, s in _anchors(chat, theirs[start:])]
    bounds = [(start - 1, -1), *anchors, (len(theirs), len(seq))]
    gaps = [(list(range(i0 + 1, i1)), list(range(s0 + 1, s1))) for (i0, s0), (i1, s1) in itertools.pairwise(bounds)]
    if sum(len(them) * len(us) for them, us in gaps) > ALIGNED_CELLS:
        return None
    at = [indices[j] if j >= 0 else shown[-1 - j][0] for j in seq]  # the chat's index of each
    texts.load([at[s] for them, us in gaps if them for s in us])

    def weight(i: int, s: int, last: bool) -> float | None:
        if theirs[i][0] != chat[s][0]:
            return None
        agree = SAME if theirs[i] == chat[s] else texts.weight(i, at[s])
        if seq[s] < 0:  # a hidden message: shown again where the history says it (spaced otherwise, perhaps)
            return SAME if agree == SAME else None
        return agree if agree > 0 or not last else None

    reading = Reading(held=[*range(start), *[None] * (len(theirs) - start)])
    for i, s in anchors:
        if seq[s] >= 0:
            reading.held[i] = seq[s]
        else:
            reading.shown.append((i, shown[-1 - seq[s]][0]))
    for n, (them, us) in enumerate(gaps, start=1):
        last = n == len(gaps)  # (a pair there shares words, whether the chat ends there or its last reply follows)
        pairs = _paired(them, us, kinds, lambda i, s, last=last: weight(i, s, last), end=last and end)
        for i, s in pairs:
            if theirs[i] != chat[s]:
                (reading.spaced if texts.weight(i, at[s]) == SAME else reading.edited).append(i)
            if seq[s] < 0:
                reading.shown.append((i, at[s]))
            else:
                reading.held[i] = seq[s]
        paired = {s for _, s in pairs}
        reading.gone += [seq[s] for s in us if s not in paired and seq[s] >= 0]
        paired = {i for i, _ in pairs}
        reading.added += [i for i in them if i not in paired and (not (last and end) or paired and i < max(paired))]
    return _valid(reading, len(theirs), len(ours))


def _valid(reading: Reading, count: int, ours: int) -> Reading | None:
    """The reading where it is one a person makes (module docstring), else None."""
    reading.gone.sort()
    reading.edited.sort()
    reading.added.sort()
    reading.shown.sort()
    edits = len(reading.edited)
    kept = sorted(j for j in reading.held if j is not None)
    first = next((i for i, j in enumerate(reading.held) if j is not None), count)
    amid = any(kept and kept[0] < j < kept[-1] for j in reading.gone) or reading.added or reading.shown
    if not amid or (reading.added and reading.added[0] < first):
        return None
    firsts = [i for n, i in enumerate(reading.added) if not n or reading.added[n - 1] != i - 1]  # each run's first
    after = [next((j for j in reading.held[i:] if j is not None), ours) for i in firsts]  # the chat's message after
    if sum(ours - j for j in after) > ADDED_MOVES:
        return None
    if len(reading.gone) + len(reading.added) + edits > len(kept) + len(reading.shown) - edits:
        return None
    return reading
