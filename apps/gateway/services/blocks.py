"""Whole blocks of messages a request's history leaves out of the chat or adds amid it, read from the history and
the chat's digests (services/sync.py writes them through services/writing.py): messages deleted or hidden in a front
end, and messages shown again there. Each reading is exact (the history goes on as the chat does to its end), so it
is cheap to refuse: a request that only appends reads none of them past its first test."""

from __future__ import annotations

from apps.chats.models import Chat, Message
from apps.chats.selectors import HistoryDigests
from apps.gateway.services.placing import DIGESTS
from apps.gateway.services.request import Line, said

HIDDEN_AFTER = 4  # messages of the chat's end a request hiding more than it holds must send: two exchanges

HIDDEN_SAID = 20  # characters, of one of them at least: not only "ok" and "..."


def dropped_count(history: list[Line], stored: HistoryDigests, same: int, *, answered: bool, hide: bool) -> int:
    """How many of the chat's messages from position `same` on the history leaves out, going on after them as the
    chat does to its end (then perhaps the person's new turn): messages deleted in the front end. 0 when it does not:
    nothing before them or after them agrees, they outnumber the messages that do (a side request, or a trimmed
    history not found, that happens to end as the chat does: services/sync.py answers it unstored), or only the last
    chat message is left out (the comparison deletes that alone). Where they are to be hidden (`hide`: nothing is
    lost), they may outnumber them, as a long stretch hidden in SillyTavern does, if the history then sends the
    chat's last HIDDEN_AFTER messages, one saying at least HIDDEN_SAID characters."""
    count = len(stored.indices)
    if not 0 < same < count - 1:
        return 0
    # A request answered and not stored (Impersonate, a quiet prompt) writes the deletions it shows all the same,
    # and appends nothing: only its history as it stands.
    for end in _ends(history, answered=answered):
        dropped = count - end
        if not (0 < dropped and end > same and _goes_on(history[same:end], stored, same + dropped)):
            continue
        after = history[same:end]
        if dropped <= end or (
            hide and len(after) >= HIDDEN_AFTER and any(len(line.content) >= HIDDEN_SAID for line in after)
        ):
            return dropped
    return 0


def _ends(history: list[Line], *, answered: bool) -> list[int]:
    """Where the history may end as the chat does: at its end, or before the person's new turn."""
    return [len(history), len(history) - 1] if history[-1].role == "user" and not answered else [len(history)]


def _goes_on(lines: list[Line], stored: HistoryDigests, position: int, end: int | None = None) -> bool:
    """Whether `lines` are the chat's messages from `position` (of `stored`) to its end, or to `end`."""
    end = len(stored.indices) if end is None else end
    theirs = "".join([DIGESTS.of(line.content) for line in lines])
    speakers = "".join(["u" if line.role == "user" else "a" for line in lines])
    return theirs == stored.md5[32 * position : 32 * end] and speakers == stored.speakers[position:end]


def inserted_count(history: list[Line], stored: HistoryDigests, same: int, *, answered: bool) -> tuple[int, bool]:
    """How many messages the history says after the chat's first `same` that the chat does not hold, going on after
    them as the chat does to its end (then perhaps the person's new turn), or to its last reply left out to be
    regenerated (True): messages added amid the chat, as a message hidden in the front end and since deleted here
    (above) comes back when shown again. 0 when it does not, or when nothing of the chat comes before them or after
    them."""
    count = len(stored.indices)
    if not 0 < same < count:
        return 0, False
    for end in _ends(history, answered=answered):
        inserted = end - count
        if inserted > 0 and _goes_on(history[same + inserted : end], stored, same):
            return inserted, False
    # The person's turn then, the reply to it left out: a regenerate (as the comparison reads one).
    inserted = len(history) - (count - 1)
    if (
        not answered
        and history[-1].role == "user"
        and stored.speakers[-1] == "a"
        and inserted > 0
        and same < count - 1
    ):
        if _goes_on(history[same + inserted :], stored, same, count - 1):
            return inserted, True
    return 0, False


SLID_MOST = 50  # places a block of repeated messages is slid back to find the chat's hidden messages it shows again


def hidden_at(chat: Chat, history: list[Line], stored: HistoryDigests, same: int, inserted: int):
    """Where the block of `inserted` messages after the history's first `same` goes (a position of `stored`), and
    the chat's messages hidden there that it shows again (none: it is added there). Where the messages before the
    block say what its last ones say ("ok", "..."), it could stand further back as well: the places are tried from
    the last back, for hidden messages saying the same, by the same speakers."""
    place = same
    for _ in range(SLID_MOST):
        shown = shown_between(
            chat, stored.indices[place - 1], stored.indices[place], history[place : place + inserted]
        )
        if shown:
            return place, shown
        before, last = history[place - 1], history[place + inserted - 1]
        if place == 1 or (before.role, before.content) != (last.role, last.content):
            break
        place -= 1
    return same, []


def shown_between(chat: Chat, low: int, high: int, lines: list[Line]) -> list[tuple[int, bool, str]]:
    """The chat's messages hidden between indices `low` and `high` (index, is_user, text) that `lines` say, each in
    turn (below); none unless every line is one of them."""
    rows = Message.objects.filter(chat=chat, index__gt=low, index__lt=high, is_system=True).order_by("index")
    return _shown(list(rows.values_list("index", "is_user", "mes")), lines)


def _shown(hidden: list[tuple[int, bool, str]], lines: list[Line]) -> list[tuple[int, bool, str]]:
    """The hidden messages (index, is_user, text) that `lines` say, each in turn, by the same speakers (others of
    them may stay hidden between: a part of a hidden block shown again); none unless every line is one of them."""
    shown, found = [], iter(hidden)
    for line in lines:
        for row in found:
            if row[1] == (line.role == "user") and said(row[2]) == line.said:
                shown.append(row)
                break
        else:
            return []
    return shown


SHOWN_MOST = 1_000  # the chat's hidden messages read to find those a history shows again, at most


def shown_amid(
    chat: Chat, history: list[Line], stored: HistoryDigests, same: int, *, answered: bool
) -> dict[int, int] | None:
    """Where the history is the chat from its first `same` messages on with some of its hidden messages among them,
    in their places (several blocks hidden, shown again at once), then perhaps the person's new turn: the history's
    position of each of them, by the chat's index. None where it is not."""
    count = len(stored.indices)
    if not 0 < same < count or len(history) <= count:
        return None
    rows = Message.objects.filter(chat=chat, index__gt=stored.indices[same - 1], is_system=True).order_by("index")
    hidden = list(rows.values_list("index", "is_user", "mes")[: SHOWN_MOST + 1])
    if not hidden or len(hidden) > SHOWN_MOST:
        return None
    for end in _ends(history, answered=answered):
        found = _walked(history[:end], stored, same, hidden)
        if found:
            return found
    return None


def _walked(history: list[Line], stored: HistoryDigests, same: int, hidden: list[tuple[int, bool, str]]):
    """The history from position `same` walked along the chat: each message the chat's next visible one, or else
    one of its hidden messages standing before that one (and after the visible one before it). The hidden messages
    said, by index (their history's position); None where the history is not so walked to both ends."""
    count = len(stored.indices)
    found: dict[int, int] = {}
    visible, rows = same, iter(hidden)
    row = next(rows, None)
    for n in range(same, len(history)):
        line = history[n]
        digest = ("u" if line.role == "user" else "a") + DIGESTS.of(line.content)
        if visible < count and digest == stored.speakers[visible] + stored.md5[32 * visible : 32 * visible + 32]:
            visible += 1  # (a hidden message saying what the next visible one says stays hidden)
            continue
        low = stored.indices[visible - 1]
        high = stored.indices[visible] if visible < count else None
        while row is not None and (
            row[0] < low or not (row[1] == (line.role == "user") and said(row[2]) == line.said)
        ):
            if high is not None and row[0] > high:
                return None
            row = next(rows, None)
        if row is None or (high is not None and row[0] > high):
            return None
        found[row[0]] = n
        row = next(rows, None)
    return found if visible == count else None
