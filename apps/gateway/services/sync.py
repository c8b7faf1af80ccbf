"""The messages are the chat: a request carries the whole history (or its newest part), which is compared with the
stored chat, and only what changed is written, through the chat write path (apps/chats/services/writes.py and
patch.py: the row lock, a new integrity, indexing and extraction after the commit).

From where the request's history starts in the chat (services/match.py), message by message:
- the same speaker saying something else is an edit (the message and its shown swipe);
- another speaker where the chat had one: from there on the request replaces the chat's end;
- messages the request leaves out amid the chat, going on after them as the chat does to its end, are deleted, and
  only they (the later ones keep their swipes and extension data: _dropped_count); with other changes besides (more
  blocks left out, edits, the end cut, a regenerate, messages added at the end), the history is read message by
  message against the chat (services/aligning.py) and only the deletions and edits are written;
- messages the request adds amid the chat, going on after them as the chat does to its end (messages hidden in the
  front end, so deleted here, then shown again), are inserted there, or the chat's hidden messages saying the same
  shown again (_inserted);
- stored messages past the request's end are deleted, except
- the request that ends where the chat's last reply was (the same history, the reply missing): a regenerate, whose
  reply becomes a new swipe of that message (generation's swipe mode);
- messages past the chat's end are appended; the last, the person's, is their turn (appended with the reply's
  generation, as the web chat does, so its recall is kept on it); a history ending with a reply asks to continue it;
- a request whose last message is SillyTavern's Impersonate instruction asks for a draft of the person's next
  message, and a history ending with a reply followed by another instruction than SillyTavern's continue nudge
  asks for something else than the story's next words (a quiet prompt: a summary, `/gen`): answered, never stored
  (generation's impersonate mode).
A history whose first messages (at most HEAD_KEPT: the greeting) are the chat's and whose next ones stand in it
further on, near its end (services/window.py), or whose last ones are the chat's last (too few for that search, or
the first of them edited), is a front end's cut with the greeting kept ahead of it: compared from there, the
messages between kept. Messages SillyTavern hides from the model (`is_system`) are not compared; a
request with no history (only system messages) changes nothing.

What a chat holds is never rewritten on a guess:
- a chat found by a guess (its fingerprint, an edited opening, its position: services/match.py) that the request
  would rewrite before its last exchange (its last two messages) is left as it is: messages deleted there, or a
  message edited there along with another. The request goes on in a branch of it holding the messages before the
  first it changes (another story with the same opening, a branch made in the front end, messages deleted there),
  kept under the fingerprint's key and a suffix of its own, where the story's next requests find it. (Messages only
  left out there, the history going on as the chat does to its end, are hidden where they stand instead: a front
  end's hide, or a deletion; nothing is lost, and no branch copies the story.) An edit of one earlier
  message alone is written in place, as a person makes one;
- a chat named by the request (the header) that the history does not fit is answered and not stored: fewer than
  half the messages compared are the chat's, and it would rewrite the chat before its last exchange (a front end's
  side request, for a title or a summary, sent with the header; a trimmed history not found in it).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from apps.chats.models import Chat, Message
from apps.chats.selectors import HistoryDigests, history_digests
from apps.chats.services.branch import chat_branch
from apps.chats.services.chats import chat_lock
from apps.chats.services.patch import MAX_PATCH_OPERATIONS, chat_patch
from apps.chats.services.start import send_date
from apps.chats.services.writes import MAX_APPEND_MESSAGES, chat_append
from apps.gateway.services.aligning import Reading, aligned
from apps.gateway.services.placing import DIGESTS, compared, kept_place, worded
from apps.gateway.services.request import Line, said
from apps.gateway.services.window import HEAD_KEPT
from apps.generation.models import Generation

IMPERSONATION = re.compile(r"\s*\[?Write your next reply from the point of view of", re.IGNORECASE)
CONTINUE_NUDGE = re.compile(r"\s*\[?Continue your last message", re.IGNORECASE)


@dataclass
class Synced:
    chat: Chat
    mode: str = Generation.Mode.NEW
    message: str | None = None  # the person's turn, appended with the generation
    written: dict[str, int] = field(default_factory=lambda: {"appended": 0, "edited": 0, "deleted": 0})
    # For each message of the request's history (system messages aside), the index of the chat's message that holds
    # exactly its text, or None (the person's turn, not yet appended; a text equal but for whitespace). The prompt
    # is kept with the reply by these (services/complete.py), not copied.
    indices: list[int | None] = field(default_factory=list)


def _answered_only(lines: list[Line], history: list[Line]) -> bool:
    """Whether the request asks for text that is not the story's next message (see the module's docstring)."""
    if not lines or lines[-1].role != "system":
        return False
    if IMPERSONATION.match(lines[-1].content):
        return True
    return bool(history) and history[-1].role == "assistant" and CONTINUE_NUDGE.match(lines[-1].content) is None


def _edits(chat: Chat, texts: dict[int, str]) -> list[dict[str, Any]]:
    """The operations writing each text over the chat's message at its index: its text and its shown swipe (the
    messages' swipes read at once)."""
    if not texts:
        return []
    rows = Message.objects.filter(chat=chat, index__in=list(texts)).values_list("index", "swipes", "swipe_id")
    shown_swipes = {index: (swipes, shown or 0) for index, swipes, shown in rows}
    operations = []
    for index, text in texts.items():
        operations.append({"op": "replace", "path": f"/{index}/mes", "value": text})
        swipes, shown = shown_swipes[index]
        if isinstance(swipes, list) and 0 <= shown < len(swipes):
            operations.append({"op": "replace", "path": f"/{index}/swipes/{shown}", "value": text})
    return operations


def _line(chat: Chat, line: Line) -> dict[str, Any]:
    is_user = line.role == "user"
    name = line.name or (chat.user_name if is_user else chat.character_name) or ("You" if is_user else "Assistant")
    return {"name": name, "is_user": is_user, "is_system": False, "send_date": send_date(), "mes": line.content,
            "extra": {"lorekeeper": {"via": "gateway"}}}  # fmt: skip


def _patch(chat: Chat, operations: list[dict[str, Any]]) -> Chat:
    for start in range(0, len(operations), MAX_PATCH_OPERATIONS):
        chat = chat_patch(
            chat=chat, operations=operations[start : start + MAX_PATCH_OPERATIONS], integrity=chat.integrity
        ).chat
    return chat


def _append(chat: Chat, lines: list[dict[str, Any]]) -> Chat:
    for start in range(0, len(lines), MAX_APPEND_MESSAGES):
        part = lines[start : start + MAX_APPEND_MESSAGES]
        chat = chat_append(chat=chat, messages=part, integrity=chat.integrity).chat
    return chat


@transaction.atomic
def history_sync(
    *, chat: Chat, lines: list[Line], start: int = 0, head: int = 0, branch_key: str = "", named: bool = False
) -> Synced:
    """Write what the request's history changes in the chat (from message `start` on) and answer how the reply is
    asked for: a new reply (to `message`, the person's turn, when it is new), a swipe, or a continuation. Runs in
    the caller's transaction, the chat locked from the comparison on. `branch_key`: the chat was found by a guess,
    and a request that would rewrite it before its last exchange goes on in a branch with that key; `named`: the
    request named the chat, and a history that does not fit it is not stored (the module's docstring). `head`: the
    history's first messages that are the chat's first, kept by the front end ahead of its cut (its greeting); the
    rest is compared from `start`."""
    chat = chat_lock(chat=chat)
    history = [line for line in lines if line.role != "system"]
    if not history:  # only a system prompt: nothing of the chat is said, so nothing of it is deleted
        return Synced(chat)
    kept = _kept(chat, history[:head]) if head else []
    history = history[head:]
    # What the chat says is compared by its MD5, kept with each message (Message.mes_md5) and read from an index as
    # one string: a long chat's text is not read to find it unchanged, and the history agreeing with it (every turn
    # but the new one) is found by comparing two strings, not message by message. Only a message whose digest
    # differs is read (then compared with whitespace normalised).
    stored = history_digests(chat=chat, start=start)
    synced = Synced(chat, indices=[None] * len(history))
    operations: list[dict[str, Any]] = []
    cut, digests, same = compared(history, stored)  # from the first speaker that differs the request replaces
    last_exchange = len(stored.indices) - 2
    agree = 0  # the history's first messages that are the chat's, where it may be a front end's cut past them
    if not (head or start) and same <= HEAD_KEPT and same < last_exchange and (same < cut or cut < len(history)):
        # The chat's first messages, then a run of its newest: a front end that keeps the greeting past its cut.
        # Looked for before the messages that differ are read one by one (every message of the run would be).
        agree = worded(chat, history, stored, digests, same, min(cut, HEAD_KEPT + 1))
        placed = (
            kept_place(chat, history, stored, agree, named=named)
            if 0 < agree <= HEAD_KEPT and agree < last_exchange
            else None
        )
        if placed is not None:
            first, at = placed
            return history_sync(chat=chat, lines=lines, start=at, head=first, branch_key=branch_key, named=named)
    # Messages deleted in the front end amid the history: only they are deleted, the chat's later messages kept as
    # they are (their swipes and extension data), not deleted and written again. In a guessed chat, before its last
    # exchange, they are hidden instead (a front end's hide, or a deletion: nothing is lost on a guess, and the
    # story goes on in one chat, not in a branch copying it).
    answered = _answered_only(lines, history)
    hide = bool(branch_key) and same < last_exchange
    dropped = _dropped_count(history, stored, same, answered=answered, hide=hide)
    if dropped:
        return _dropped(chat, history, stored, same, dropped, kept, answered=answered, hide=hide)
    # Messages added amid the chat (hidden in the front end, then shown again), the history going on after them as
    # the chat does to its end: only they are written, the chat's messages kept as they are.
    inserted, regenerate = _inserted_count(history, stored, same, answered=answered)
    if inserted:
        return _inserted(chat, history, stored, same, inserted, kept, answered=answered, regenerate=regenerate)
    shown = _shown_amid(chat, history, stored, same, answered=answered)
    if shown is not None:
        return _shown_again(chat, history, stored, shown, kept, answered=answered)
    # Messages deleted amid the history along with other changes: read message by message (services/aligning.py).
    # A guessed chat's reading is written only where the comparison would write the chat before its last exchange
    # too: nothing deleted there, and at most one message edited there, alone; or where it edits nothing there (more
    # blocks left out, the last reply regenerated): those left out are hidden, as above.
    if same < len(stored.indices):
        reading = aligned(history, stored, same, answered=answered, read=_texts_at(chat, stored))
        if reading is not None and not (branch_key and _early(reading, last_exchange)):
            return _aligned(chat, history, stored, reading, kept, answered=answered)
        if reading is not None and not reading.edited:
            return _aligned(chat, history, stored, reading, kept, answered=answered, hide=True)
    synced.indices[:same] = stored.indices[:same]
    edited = []  # the positions of the history whose message says something else than the chat's
    differing = [n for n in range(same, cut) if digests[32 * n : 32 * n + 32] != stored.md5[32 * n : 32 * n + 32]]
    # Their texts read at once: a history whose every reply differs read one message at a time took a second.
    texts = _texts_at(chat, stored)(differing) if differing else {}
    for n in range(same, cut):
        if digests[32 * n : 32 * n + 32] == stored.md5[32 * n : 32 * n + 32]:
            synced.indices[n] = stored.indices[n]
        elif history[n].said != said(texts.get(n, "")):
            edited.append(n)  # (the same words spaced otherwise: not an edit, and the prompt keeps them as sent)
    regenerate = not answered and (
        cut == len(history) == len(stored.indices) - 1 and history[-1].role == "user" and stored.speakers[-1] == "a"
    )
    deleted_from = cut if not regenerate and cut < len(stored.indices) else len(stored.indices)
    # Rewritten before the chat's last exchange: messages deleted there, or a message edited there along with
    # another (a person's edit of one earlier message is written in place).
    early = deleted_from < last_exchange or (bool(edited) and edited[0] < last_exchange and len(edited) >= 2)
    rewrites = deleted_from < last_exchange or bool(edited and edited[0] < last_exchange)
    if branch_key and early:
        first = min([*edited[:1], deleted_from])
        return _branched(chat, lines, start, head, stored.indices[first - 1] if first else None, branch_key)
    agreeing = cut - len(edited)
    # Fewer than half the messages compared are the chat's; or the chat's opening alone, its speakers then parting
    # from the chat's at once and the history going on, where more would be deleted than agree: a front end's cut
    # whose newest message was edited, one keeping more of the opening than HEAD_KEPT, or a block deleted larger
    # than what is kept (as _dropped_count refuses one). (A person's first message edited and the rest deleted keeps
    # the speakers' order: written as it comes.)
    opening = max(agree, same)
    goes_on = len(history) - (1 if history[-1].role == "user" and not answered else 0)  # the new turn aside
    kept_cut = 0 < opening == cut < goes_on and len(stored.indices) - deleted_from > agreeing
    misfit = cut == 0 or agreeing * 2 < cut or kept_cut
    if named and misfit and rewrites:
        return Synced(chat, mode=Generation.Mode.IMPERSONATE, indices=[*kept, *[None] * len(history)])
    operations += _edits(chat, {stored.indices[n]: history[n].content for n in edited})
    for n in edited:
        synced.written["edited"] += 1
        synced.indices[n] = stored.indices[n]
    if regenerate:
        synced.mode = Generation.Mode.SWIPE
    elif cut < len(stored.indices):  # the request ends before the chat does: the rest was deleted in the front end
        first = stored.indices[cut]
        operations += [{"op": "remove", "path": f"/{index}"} for index in range(chat.message_count - 1, first - 1, -1)]
        synced.written["deleted"] = chat.message_count - first
    if operations:
        chat = _patch(chat, operations)
    new = history[cut:] if not regenerate else []
    if new and new[-1].role == "user" and not answered:
        synced.message, new = new[-1].content, new[:-1]
    return _ended(synced, chat, history, range(cut, cut + len(new)), kept, answered=answered)


HIDDEN_AFTER = 4  # messages of the chat's end a request hiding more than it holds must send: two exchanges
HIDDEN_SAID = 20  # characters, of one of them at least: not only "ok" and "..."


def _dropped_count(history: list[Line], stored: HistoryDigests, same: int, *, answered: bool, hide: bool) -> int:
    """How many of the chat's messages from position `same` on the history leaves out, going on after them as the
    chat does to its end (then perhaps the person's new turn): messages deleted in the front end. 0 when it does not:
    nothing before them or after them agrees, they outnumber the messages that do (a side request, or a trimmed
    history not found, that happens to end as the chat does: answered, not stored, below), or only the chat's last
    message is left out (the comparison deletes that alone). Where they are to be hidden (`hide`: nothing is lost),
    they may outnumber them, as a long stretch hidden in SillyTavern does, if the history then sends the chat's
    last HIDDEN_AFTER messages, one saying at least HIDDEN_SAID characters."""
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


def _asked(synced: Synced, history: list[Line], held: int, *, answered: bool) -> Synced:
    """How the reply is asked for, the history written as the chat's messages but for its last `len(history) -
    held`: a draft answered only, the person's turn after them, or a continuation of the history's last reply."""
    if answered:
        synced.mode = Generation.Mode.IMPERSONATE
    elif len(history) > held:
        synced.message = history[-1].content  # the person's turn
    elif history[-1].role == "assistant":
        synced.mode = Generation.Mode.CONTINUE
    return synced


def _dropped(
    chat: Chat,
    history: list[Line],
    stored: HistoryDigests,
    same: int,
    dropped: int,
    kept: list[int | None],
    *,
    answered: bool,
    hide: bool = False,
) -> Synced:
    """The history written as the chat with its messages from position `same` on, `dropped` of them, deleted: those
    deleted, the messages after them kept (each now `dropped` places earlier). `hide`: hidden from the model
    (`is_system`) instead, where they stand."""
    gone = stored.indices[same : same + dropped]
    if hide:
        chat = _patch(chat, [{"op": "add", "path": f"/{index}/is_system", "value": True} for index in gone])
        held = [*stored.indices[:same], *stored.indices[same + dropped :]]
    else:
        chat = _patch(chat, [{"op": "remove", "path": f"/{index}"} for index in reversed(gone)])
        held = [*stored.indices[:same], *[index - dropped for index in stored.indices[same + dropped :]]]
    synced = Synced(chat, indices=[*kept, *held, *[None] * (len(history) - len(held))])
    synced.written["hidden" if hide else "deleted"] = dropped
    return _asked(synced, history, len(held), answered=answered)


def _inserted_count(history: list[Line], stored: HistoryDigests, same: int, *, answered: bool) -> tuple[int, bool]:
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


def _hidden_at(chat: Chat, history: list[Line], stored: HistoryDigests, same: int, inserted: int):
    """Where the block of `inserted` messages after the history's first `same` goes (a position of `stored`), and
    the chat's messages hidden there that it shows again (none: it is added there). Where the messages before the
    block say what its last ones say ("ok", "..."), it could stand further back as well: the places are tried from
    the last back, for hidden messages saying the same, by the same speakers."""
    place = same
    for _ in range(SLID_MOST):
        lines = history[place : place + inserted]
        rows = Message.objects.filter(
            chat=chat, index__gt=stored.indices[place - 1], index__lt=stored.indices[place], is_system=True
        )
        shown = _shown(list(rows.order_by("index").values_list("index", "is_user", "mes")), lines)
        if shown:
            return place, shown
        before, last = history[place - 1], history[place + inserted - 1]
        if place == 1 or (before.role, before.content) != (last.role, last.content):
            break
        place -= 1
    return same, []


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


def _shown_amid(
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


def _shown_again(
    chat: Chat,
    history: list[Line],
    stored: HistoryDigests,
    shown: dict[int, int],
    kept: list[int | None],
    *,
    answered: bool,
) -> Synced:
    """The chat's hidden messages `shown` (by index: their position in the history) shown again; the others kept."""
    chat = _patch(chat, [{"op": "add", "path": f"/{index}/is_system", "value": False} for index in shown])
    synced = Synced(chat, indices=[None] * len(history))
    texts = dict(Message.objects.filter(chat=chat, index__in=list(shown)).values_list("index", "mes"))
    for index, n in shown.items():
        synced.indices[n] = index if texts[index] == history[n].content else None  # (not spaced otherwise)
    held = [n for n in range(len(history)) if n not in set(shown.values())][: len(stored.indices)]
    for n, index in zip(held, stored.indices, strict=False):
        synced.indices[n] = index
    synced.written["shown"] = len(shown)
    synced.indices = [*kept, *synced.indices]
    return _asked(synced, history, len(stored.indices) + len(shown), answered=answered)


def _inserted(
    chat: Chat,
    history: list[Line],
    stored: HistoryDigests,
    same: int,
    inserted: int,
    kept: list[int | None],
    *,
    answered: bool,
    regenerate: bool,
) -> Synced:
    """The history written as the chat with `inserted` messages added after its first `same`: those added, the chat's
    messages kept (each after them now `inserted` places later), and the chat's last reply regenerated where the
    history leaves it out (`regenerate`). Where the chat holds as many messages hidden from the model there
    (`is_system`: by the gateway, on the chat page, or by SillyTavern's extension) saying the same, by the same
    speakers, they are shown again rather than added."""
    same, hidden = _hidden_at(chat, history, stored, same, inserted)
    if hidden:
        operations = [{"op": "add", "path": f"/{index}/is_system", "value": False} for index, _, _ in hidden]
        placed = [index for index, _, _ in hidden]
        later = 0  # the chat's messages keep their indices
    else:
        at = stored.indices[same]
        lines = history[same : same + inserted]
        operations = [{"op": "add", "path": f"/{at + n}", "value": _line(chat, line)} for n, line in enumerate(lines)]
        placed = list(range(at, at + inserted))
        later = inserted
    chat = _patch(chat, operations)
    after = stored.indices[same : len(stored.indices) - regenerate]
    held = [*stored.indices[:same], *placed, *[index + later for index in after]]
    synced = Synced(chat, indices=[*kept, *held, *[None] * (len(history) - len(held))])
    for n, (index, _, mes) in enumerate(hidden, start=len(kept) + same):
        # (held as the chat holds them only where the text is the same, not spaced otherwise)
        synced.indices[n] = index if mes == history[n - len(kept)].content else None
    synced.written["shown" if hidden else "appended"] = inserted
    if regenerate:
        synced.mode = Generation.Mode.SWIPE
        return synced
    return _asked(synced, history, len(held), answered=answered)


def _early(reading: Reading, last_exchange: int) -> bool:
    """Whether the reading rewrites the chat before its last exchange, as a guessed chat's request may not."""
    edited = [reading.held[n] for n in reading.edited]
    early_edit = any(position < last_exchange for position in edited)
    return reading.gone[0] < last_exchange or (early_edit and len(edited) >= 2)


def _aligned(
    chat: Chat,
    history: list[Line],
    stored: HistoryDigests,
    reading: Reading,
    kept: list[int | None],
    *,
    answered: bool,
    hide: bool = False,
) -> Synced:
    """The history written as `reading` has it: the messages it edits edited (not those spaced otherwise), those it
    leaves out deleted (`hide`: hidden from the model where they stand), the others kept (each now as many places
    earlier as were deleted before it), and what follows the chat's end appended, or the person's turn."""
    operations = _edits(chat, {stored.indices[reading.held[n]]: history[n].content for n in reading.edited})
    gone = [stored.indices[p] for p in reading.gone]
    if hide:
        operations += [{"op": "add", "path": f"/{index}/is_system", "value": True} for index in gone]
    else:
        operations += [{"op": "remove", "path": f"/{index}"} for index in reversed(gone)]
    chat = _patch(chat, operations)
    synced = Synced(chat, indices=[None] * len(history))
    synced.written.update(edited=len(reading.edited))
    synced.written["hidden" if hide else "deleted"] = len(gone)
    spaced = set(reading.spaced)  # held as sent, not as the chat holds it: no index (as the comparison gives none)
    for n, p in enumerate(reading.held):
        if p is not None and n not in spaced:
            synced.indices[n] = stored.indices[p] - (0 if hide else bisect.bisect_left(gone, stored.indices[p]))
    new = [n for n, p in enumerate(reading.held) if p is None]
    if new and history[new[-1]].role == "user" and not answered:
        synced.message, new = history[new[-1]].content, new[:-1]
    if reading.regenerate:  # (the history ends with the person's turn, and is not answered only)
        synced.mode = Generation.Mode.SWIPE
    return _ended(synced, chat, history, new, kept, answered=answered)


def _ended(synced: Synced, chat: Chat, history: list[Line], new, kept: list[int | None], *, answered: bool) -> Synced:
    """The history's messages at positions `new` (at its end) appended, and how the reply is asked for: a draft
    answered only, or a continuation of the history's last reply."""
    new = list(new)
    if new:
        first = chat.message_count
        chat = _append(chat, [_line(chat, history[n]) for n in new])
        synced.written["appended"] = len(new)
        synced.indices[new[0] : new[-1] + 1] = range(first, first + len(new))
    if answered:
        synced.mode = Generation.Mode.IMPERSONATE
    elif history[-1].role == "assistant":
        synced.mode = Generation.Mode.CONTINUE
    synced.chat = chat
    synced.indices = [*kept, *synced.indices]
    return synced


def _texts_at(chat: Chat, stored: HistoryDigests):
    """The texts of the chat's messages at positions of `stored`, read at once (services/aligning.py asks)."""

    def read(positions: list[int]) -> dict[int, str]:
        at = {stored.indices[p]: p for p in positions}
        rows = Message.objects.filter(chat=chat, index__in=list(at)).values_list("index", "mes")
        return {at[index]: mes for index, mes in rows}

    return read


def _kept(chat: Chat, head: list[Line]) -> list[int | None]:
    """The indices of the chat's first messages (system messages aside) that the history's `head` are: None where
    the text differs (only in its whitespace: the head was found by its words), or where the chat no longer holds
    one (deleted since the head was found, before the chat was locked)."""
    rows = Message.objects.filter(chat=chat, is_system=False).order_by("index").values_list("index", "mes")
    held = list(rows[: len(head)])
    held += [(None, None)] * (len(head) - len(held))
    return [index if mes == line.content else None for (index, mes), line in zip(held, head, strict=True)]


def _branched(chat: Chat, lines: list[Line], start: int, head: int, last: int | None, key: str) -> Synced:
    """The request written into a branch of `chat` holding its messages up to `last` (the last the two agree on), or
    answered and not stored when they agree on none."""
    history = [line for line in lines if line.role != "system"]
    if last is None:
        return Synced(chat, mode=Generation.Mode.IMPERSONATE, indices=[None] * len(history))
    branch = chat_branch(chat=chat, index=last)
    Chat.objects.filter(pk=branch.pk).update(client_key=key)
    branch.client_key = key
    return history_sync(chat=branch, lines=lines, start=start, head=head)
