"""Where a request's history stands in a chat, and how far the two agree: the history compared with the chat's
digests (one string each, Message.mes_md5 read from an index), and a front end's cut with the greeting kept ahead
of it placed (services/window.py searches the chat for the rest). What services/sync.py writes from, and
services/match.py chooses a chat by."""

from __future__ import annotations

import hashlib

from apps.chats.models import Chat, Message
from apps.chats.selectors import HistoryDigests, history_digests
from apps.gateway.services.request import Line, said, words_shared
from apps.gateway.services.window import WINDOW_CHECK, WINDOW_SLACK, window_places

# Characters of message texts whose MD5 a process keeps (about that many bytes for Latin text, four times as many at
# most): a front end sends the whole history with each turn, and its texts are hashed once, not with each request.
DIGESTS_KEPT = 8_000_000


class Digests:
    """The MD5 (hex) of the message texts a process compared lately, by the text itself (a lookup hashes it with
    Python's own string hash, a fifth of MD5's time, and compares it whole). Past DIGESTS_KEPT characters they are
    all forgotten at once. Shared by a process's threads: a dict's get and set are atomic, and a race only hashes a
    text twice."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.held: dict[str, str] = {}
        self.size = 0

    def of(self, text: str) -> str:
        found = self.held.get(text)
        if found is None:
            found = hashlib.md5(text.encode()).hexdigest()
            if self.size + len(text) > self.kept:
                self.held, self.size = {}, 0
            self.held[text] = found
            self.size += len(text)
        return found


DIGESTS = Digests(DIGESTS_KEPT)


def agreeing(ours: str, theirs: str, count: int, *, width: int = 1) -> int:
    """How many of the first `count` items of two strings of items (`width` characters each) agree, from the first
    on: one comparison of C's speed when all do (every turn of a history the chat holds), a binary search of such
    comparisons to the first that does not."""
    if ours[: count * width] == theirs[: count * width]:
        return count
    agree, differ = 0, count  # the first `agree` items agree; the first `differ` do not all
    while differ - agree > 1:
        middle = (agree + differ) // 2
        if ours[: middle * width] == theirs[: middle * width]:
            agree = middle
        else:
            differ = middle
    return agree


def compared(history: list[Line], stored: HistoryDigests) -> tuple[int, str, int]:
    """How far the history's speakers agree with the chat's (`cut`), its messages' digests that far (32 hex
    characters each), and how many of those agree from the first on (`same`)."""
    held, digest = DIGESTS.held, DIGESTS.of
    cut = min(len(history), len(stored.indices))
    speakers = "".join(["u" if line.role == "user" else "a" for line in history[:cut]])
    cut = agreeing(speakers, stored.speakers, cut)
    digests = "".join([held.get(line.content) or digest(line.content) for line in history[:cut]])
    return cut, digests, agreeing(digests, stored.md5, cut, width=32)


AGREEMENT_READS = 50  # messages of a chat read to tell text that differs only in its spacing, at most


def agreement(*, chat: Chat, lines: list[Line], start: int = 0) -> int:
    """How many of the request's history messages, from the first on, the chat holds (from its message `start`
    on) as they are: the same speaker and the same words (compared by digest; where the digests differ, by the text
    with whitespace normalised, for at most AGREEMENT_READS messages). Which of a story's branches the request goes
    on."""
    history = [line for line in lines if line.role != "system"]
    stored = history_digests(chat=chat, start=start)
    cut, digests, same = compared(history, stored)
    for _ in range(AGREEMENT_READS):
        if same >= cut or changed(chat, stored.indices[same], history[same]):
            break
        same += 1 + agreeing(digests[32 * (same + 1) :], stored.md5[32 * (same + 1) :], cut - same - 1, width=32)
    return same


def changed(chat: Chat, index: int, line: Line) -> bool:
    return line.said != said(Message.objects.values_list("mes", flat=True).get(chat=chat, index=index))


def worded(chat: Chat, history: list[Line], stored: HistoryDigests, digests: str, same: int, limit: int) -> int:
    """How many of the history's first messages say what the chat's first say, `same` known to (by digest), at most
    `limit`: past `same`, the same words spaced otherwise agree too."""
    agree = same
    while agree < limit and (
        digests[32 * agree : 32 * agree + 32] == stored.md5[32 * agree : 32 * agree + 32]
        or not changed(chat, stored.indices[agree], history[agree])
    ):
        agree += 1
    return agree


def kept_place(
    chat: Chat, history: list[Line], stored: HistoryDigests, agree: int, *, named: bool = False
) -> tuple[int, int] | None:
    """(head, index): how many of the history's first `agree` messages, the chat's first, a front end kept past its
    cut, and where the rest stands in the chat (compared from there); None when it stands nowhere. The fewest first,
    as a guessed chat's (kept_window): the rest may begin with the words the chat says after its greeting ("..."),
    which would otherwise be counted in the head. The rest stands past the chat's message after the head (one
    standing there is no cut): found by the window search, else by its last messages (_at_end)."""
    for first in range(1, agree + 1):
        at = kept_at(chat, history[first:], after=stored.indices[first] + 1)
        if at is not None:
            return first, at
    for first in range(1, agree + 1):
        at = _at_end(chat, history, stored, first, named=named)
        if at is not None:
            return first, at
    return None


def _at_end(chat: Chat, history: list[Line], stored: HistoryDigests, head: int, *, named: bool) -> int | None:
    """Where the history after its kept `head` stands when the window search did not place it (its first messages
    edited, or the chat holding fewer than two of them: a front end whose context keeps the greeting and only the
    newest message): its last messages are the chat's last, perhaps followed by the person's new turn, or they end
    before the chat's last reply (a regenerate of it). Told by its last WINDOW_CHECK messages the chat holds. The
    index the rest is compared from (past the chat's message after the head), or None."""
    rest, count = len(history) - head, len(stored.indices)
    tries = [(rest, count - rest)]  # (messages the chat holds, where the first stands): to the chat's end
    if history[-1].role == "user":
        if stored.speakers[-1:] == "a":
            tries.append((rest, count - 1 - rest))  # a regenerate of the last reply
        tries.append((rest - 1, count - rest + 1))  # the person's new turn after the chat's last message
    for held, at in tries:
        told = range(max(held - WINDOW_CHECK, 0), held)
        if held and at > head and all(_holds(chat, stored, at + n, history[head + n]) for n in told):
            # Counted back from the chat's end, the rest's first message stands there unless messages were deleted
            # in the front end among the rest: then it stands before, where the rest is compared from (the
            # messages between deleted, services/sync.py), not written over the message at `at`.
            return stored.indices[_begun(stored, history[head], low=max(head + 1, at - WINDOW_SLACK), high=at)]
    return _edited_at_end(chat, history, stored, head) if named else None


EDIT_WORDS = 0.5  # the words an edit of one of the chat's newest messages shares with it, at least (words_shared)


def _edited_at_end(chat: Chat, history: list[Line], stored: HistoryDigests, head: int) -> int | None:
    """Where a rest of the chat's newest message or two stands when the person edited one of them (the same speaker,
    at least half its words kept), a named chat's only: a front end keeping the greeting and only the newest
    message or two. The reply before their last turn then that turn edited (a regenerate, or a retry of a turn whose
    reply failed), the chat's last message edited then a new turn, their last turn alone edited (a regenerate), or
    the last reply alone edited (a continue). Not where the edited message is word for word one of the chat's newest
    (it is that message, the ones after it deleted), nor where it shares as many words with the chat's message after
    the head (an edit of that one, the rest deleted). Else None: the request is answered and not stored
    (services/sync.py), and so would every later one be, the front end never sending what the chat holds again."""
    rest, count, last = history[head:], len(stored.indices), stored.speakers[-1:]
    tries = []  # (where the rest is compared from, its message the person edited, that message's place)
    if len(rest) == 2 and rest[1].role == "user":
        if count - 3 > head and last == "a" and _holds(chat, stored, count - 3, rest[0]):
            tries.append((count - 3, rest[1], count - 2))
        elif count - 2 > head and last == "u" and _holds(chat, stored, count - 2, rest[0]):
            tries.append((count - 2, rest[1], count - 1))  # the person's turn whose reply failed
        else:
            tries.append((count - 1, rest[0], count - 1))
    elif len(rest) == 1:
        at = count - 2 if rest[0].role == "user" and last == "a" else count - 1
        tries.append((at, rest[0], at))
    newest = stored.md5[32 * max(count - WINDOW_SLACK, 0) :]
    for at, line, place in tries:
        digest = DIGESTS.of(line.content)
        if at <= head or stored.speakers[place] != ("u" if line.role == "user" else "a"):
            continue
        if any(newest[n : n + 32] == digest for n in range(0, len(newest), 32)):
            continue
        positions = [place, head] if place != head else [place]
        rows = dict(Message.objects.filter(chat=chat, index__in=[stored.indices[p] for p in positions]).values_list(
            "index", "mes"))  # fmt: skip
        shared = words_shared(line.content, rows.get(stored.indices[place], ""))
        if shared >= EDIT_WORDS and shared > words_shared(line.content, rows.get(stored.indices[head], "")):
            return stored.indices[at]
    return None


def _begun(stored: HistoryDigests, line: Line, *, low: int, high: int) -> int:
    """The last position from `low` to `high` whose message is the line word for word (its digest and speaker),
    else `high` (its text edited). At most WINDOW_SLACK back: messages deleted in the front end since, at most."""
    digest, speaker = DIGESTS.of(line.content), "u" if line.role == "user" else "a"
    found = stored.md5.rfind(digest, 32 * low, 32 * (high + 1))
    while found >= 0 and (found % 32 or stored.speakers[found // 32] != speaker):
        found = stored.md5.rfind(digest, 32 * low, found + 31)
    return found // 32 if found >= 0 else high


def _holds(chat: Chat, stored: HistoryDigests, position: int, line: Line) -> bool:
    """Whether the chat's message at `position` of its digests says the line: the same speaker, the same words."""
    if stored.speakers[position] != ("u" if line.role == "user" else "a"):
        return False
    return stored.md5[32 * position : 32 * position + 32] == DIGESTS.of(line.content) or not changed(
        chat, stored.indices[position], line
    )


def kept_at(chat: Chat, rest: list[Line], *, after: int) -> int | None:
    """Where in the chat, from index `after` on, the history after its kept head stands (window_places): of the
    places its first messages stand, the one the rest agrees with longest, then the one it ends nearest the chat's
    end at; None when they stand nowhere."""
    places = window_places([(chat.pk, chat.message_count)], rest, after=after)
    return likeliest([(chat, index) for _, index in places], rest)[1] if places else None


def likeliest(places: list[tuple[Chat, int]], lines: list[Line]) -> tuple[Chat, int]:
    """Of a story and its branches, or the places a trimmed history stands in them ((chat, the index the history is
    compared from), the most recently written first, the latest place first in each), the one the history agrees
    with longest; of those that agree as long, the one whose length is nearest the history's (a regenerate of the
    first reply goes on in the branch of two messages, not in the story of fifty), then the first."""
    if len(places) == 1:
        return places[0]
    length = sum(line.role != "system" for line in lines)

    def likeness(place: tuple[Chat, int]) -> tuple[int, int]:
        chat, start = place
        return agreement(chat=chat, lines=lines, start=start), -abs(chat.message_count - start - length)

    return max(places, key=likeness)
