"""The messages are the chat: a request carries the whole history (or its newest part), which is compared with the
stored chat, and only what changed is written, through the chat write path (apps/chats/services/writes.py and
patch.py: the row lock, a new integrity, indexing and extraction after the commit).

From where the request's history starts in the chat (services/match.py), message by message:
- the same speaker saying something else is an edit (the message and its shown swipe);
- another speaker where the chat had one: from there on the request replaces the chat's end;
- messages the request leaves out amid the chat, going on after them as the chat does to its end, are deleted, and
  only they (the later ones keep their swipes and extension data: services/blocks.py); with other changes besides (more
  blocks left out, edits, the end cut, a regenerate, messages added at the end), the history is read message by
  message against the chat (services/aligning.py) and only the deletions and edits are written;
- messages the request adds amid the chat, going on after them as the chat does to its end (messages hidden in the
  front end, so deleted here, then shown again), are inserted there, or the chat's hidden messages saying the same
  shown again (services/blocks.py);
- stored messages past the request's end are deleted, except
- the request that ends where the chat's last reply was (the same history, the reply missing): a regenerate, whose
  reply becomes a new swipe of that message (generation's swipe mode);
- messages past the chat's end are appended; the last, the person's, is their turn (appended with the reply's
  generation, as the web chat does, so its recall is kept on it); a history ending with a reply asks to continue it;
- a request whose last message is SillyTavern's Impersonate instruction asks for a draft of the person's next
  message, and a history ending with a reply followed by another instruction than SillyTavern's continue nudge
  asks for something else than the story's next words (a quiet prompt: a summary, `/gen`), and a front end's own
  task about the chat (Open WebUI's title, tags, follow-ups: services/request.py `front_end_task`): answered, never
  stored (generation's impersonate mode).
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

import re
from typing import Any

from django.db import transaction

from apps.chats.models import Chat, Message
from apps.chats.selectors import HistoryDigests, history_digests
from apps.chats.services.branch import chat_branch
from apps.chats.services.chats import chat_lock
from apps.gateway.services.aligning import HIDDEN_BACK, Reading, aligned
from apps.gateway.services.blocks import SHOWN_MOST, dropped_count, inserted_count, shown_amid
from apps.gateway.services.placing import compared, kept_place, worded
from apps.gateway.services.request import Line, front_end_task, said
from apps.gateway.services.window import HEAD_KEPT
from apps.gateway.services.writing import (
    Synced,
    aligned_written,
    dropped_written,
    edit_operations,
    ended,
    inserted_written,
    patched,
    shown_written,
)
from apps.generation.models import Generation

IMPERSONATION = re.compile(r"\s*\[?Write your next reply from the point of view of", re.IGNORECASE)
CONTINUE_NUDGE = re.compile(r"\s*\[?Continue your last message", re.IGNORECASE)


def _answered_only(lines: list[Line], history: list[Line]) -> bool:
    """Whether the request asks for text that is not the story's next message (see the module's docstring)."""
    if not lines or lines[-1].role != "system":
        return False
    if IMPERSONATION.match(lines[-1].content):
        return True
    return bool(history) and history[-1].role == "assistant" and CONTINUE_NUDGE.match(lines[-1].content) is None


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
    history = [line for line in lines if line.role != "system"]
    if front_end_task(lines):  # a front end's own task about the chat (a title): answered, not stored
        return Synced(chat, mode=Generation.Mode.IMPERSONATE, indices=[None] * len(history), plain=True)
    chat = chat_lock(chat=chat)
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
    dropped = dropped_count(history, stored, same, answered=answered, hide=hide)
    if dropped:
        return dropped_written(chat, history, stored, same, dropped, kept, answered=answered, hide=hide)
    # Messages added amid the chat (hidden in the front end, then shown again), the history going on after them as
    # the chat does to its end: only they are written, the chat's messages kept as they are.
    inserted, regenerate = inserted_count(history, stored, same, answered=answered)
    if inserted:
        return inserted_written(chat, history, stored, same, inserted, kept, answered=answered, regenerate=regenerate)
    shown = shown_amid(chat, history, stored, same, answered=answered)
    if shown is not None:
        return shown_written(chat, history, stored, shown, kept, answered=answered)
    # Messages deleted amid the history along with other changes: read message by message (services/aligning.py).
    # A guessed chat's reading is written only where the comparison would write the chat before its last exchange
    # too: nothing deleted there, and at most one message edited there, alone; or where it edits nothing there (more
    # blocks left out, the last reply regenerated): those left out are hidden, as above.
    if same < len(stored.indices):
        hidden = _hidden_after(chat, stored, same)
        reading = aligned(history, stored, same, answered=answered, read=_texts_of(chat), hidden=hidden)
        if reading is not None and not (branch_key and _early(reading, last_exchange)):
            return aligned_written(chat, history, stored, reading, kept, answered=answered)
        if reading is not None and not reading.edited:
            return aligned_written(chat, history, stored, reading, kept, answered=answered, hide=True)
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
    # than what is kept (as dropped_count refuses one). (A person's first message edited and the rest deleted keeps
    # the speakers' order: written as it comes.)
    opening = max(agree, same)
    goes_on = len(history) - (1 if history[-1].role == "user" and not answered else 0)  # the new turn aside
    kept_cut = 0 < opening == cut < goes_on and len(stored.indices) - deleted_from > agreeing
    misfit = cut == 0 or agreeing * 2 < cut or kept_cut
    if named and misfit and rewrites:
        return Synced(chat, mode=Generation.Mode.IMPERSONATE, indices=[*kept, *[None] * len(history)])
    operations += edit_operations(chat, {stored.indices[n]: history[n].content for n in edited})
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
        chat = patched(chat, operations)
    new = history[cut:] if not regenerate else []
    if new and new[-1].role == "user" and not answered:
        synced.message, new = new[-1].content, new[:-1]
    return ended(synced, chat, history, range(cut, cut + len(new)), kept, answered=answered)


def _early(reading: Reading, last_exchange: int) -> bool:
    """Whether the reading rewrites the chat before its last exchange, as a guessed chat's request may not."""
    edited = [reading.held[n] for n in reading.edited]
    early_edit = any(position < last_exchange for position in edited)
    return bool(reading.gone and reading.gone[0] < last_exchange) or (early_edit and len(edited) >= 2)


def _texts_at(chat: Chat, stored: HistoryDigests):
    """The texts of the chat's messages at positions of `stored`, read at once."""

    def read(positions: list[int]) -> dict[int, str]:
        at = {stored.indices[p]: p for p in positions}
        rows = Message.objects.filter(chat=chat, index__in=list(at)).values_list("index", "mes")
        return {at[index]: mes for index, mes in rows}

    return read


def _texts_of(chat: Chat):
    """The texts of the chat's messages at indices, read at once (services/aligning.py asks)."""

    def read(indices: list[int]) -> dict[int, str]:
        return dict(Message.objects.filter(chat=chat, index__in=indices).values_list("index", "mes"))

    return read


def _hidden_after(chat: Chat, stored: HistoryDigests, same: int) -> list[tuple[int, str]]:
    """The chat's messages hidden from the model among or after its first `same` compared (their last HIDDEN_BACK),
    (index, speaker and digest) in order, which a history may show again (services/aligning.py); none past
    SHOWN_MOST of them."""
    back = max(0, same - HIDDEN_BACK)  # (the first `same` may stand for hidden ones saying the same: aligning reads)
    rows = Message.objects.filter(chat=chat, is_system=True, index__gt=stored.indices[back - 1] if back else -1)
    rows = list(rows.order_by("index").values_list("index", "is_user", "mes_md5")[: SHOWN_MOST + 1])
    if len(rows) > SHOWN_MOST:
        return []
    return [(index, ("u" if is_user else "a") + md5) for index, is_user, md5 in rows]


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
