"""How the gateway writes what a request's history changes in the chat (services/sync.py decides what): the answer
(`Synced`), the chat write path's patches and appends, and the writers of each reading: a block left out (deleted
or hidden), a block added amid the chat or hidden messages shown again (services/blocks.py), the messages a reading
of services/aligning.py deletes and edits."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from apps.chats.models import Chat, Message
from apps.chats.selectors import HistoryDigests
from apps.chats.services.patch import MAX_PATCH_OPERATIONS, chat_patch
from apps.chats.services.start import send_date
from apps.chats.services.writes import MAX_APPEND_MESSAGES, chat_append
from apps.common.jsonpatch import json_size
from apps.gateway.services.aligning import Reading
from apps.gateway.services.blocks import hidden_at
from apps.gateway.services.request import Line
from apps.generation.models import Generation


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
    plain: bool = False  # a front end's own task: its prompt sent as it came, no memory or World Info added


def edit_operations(chat: Chat, texts: dict[int, str]) -> list[dict[str, Any]]:
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


def message_value(chat: Chat, line: Line) -> dict[str, Any]:
    is_user = line.role == "user"
    name = line.name or (chat.user_name if is_user else chat.character_name) or ("You" if is_user else "Assistant")
    return {"name": name, "is_user": is_user, "is_system": False, "send_date": send_date(), "mes": line.content,
            "extra": {"lorekeeper": {"via": "gateway"}}}  # fmt: skip


def patched(chat: Chat, operations: list[dict[str, Any]]) -> Chat:
    """The operations written in order, in as many patches as a patch's limits ask: MAX_PATCH_OPERATIONS, and the
    bytes a patch may write (LOREKEEPER_MAX_JSON_BYTES: a block of messages shown again may hold most of a request
    that was within it, and each message written carries its fields besides its text)."""
    limit = settings.LOREKEEPER_MAX_JSON_BYTES
    part: list[dict[str, Any]] = []
    size = 0
    for operation in operations:
        written = json_size(operation["value"]) if "value" in operation else 0
        if part and (len(part) == MAX_PATCH_OPERATIONS or size + written > limit):
            chat = chat_patch(chat=chat, operations=part, integrity=chat.integrity).chat
            part, size = [], 0
        part.append(operation)
        size += written
    if part:
        chat = chat_patch(chat=chat, operations=part, integrity=chat.integrity).chat
    return chat


def appended(chat: Chat, lines: list[dict[str, Any]]) -> Chat:
    for start in range(0, len(lines), MAX_APPEND_MESSAGES):
        part = lines[start : start + MAX_APPEND_MESSAGES]
        chat = chat_append(chat=chat, messages=part, integrity=chat.integrity).chat
    return chat


def asked(synced: Synced, history: list[Line], held: int, *, answered: bool) -> Synced:
    """How the reply is asked for, the history written as the chat's messages but for its last `len(history) -
    held`: a draft answered only, the person's turn after them, or a continuation of the history's last reply."""
    if answered:
        synced.mode = Generation.Mode.IMPERSONATE
    elif len(history) > held:
        synced.message = history[-1].content  # the person's turn
    elif history[-1].role == "assistant":
        synced.mode = Generation.Mode.CONTINUE
    return synced


def ended(synced: Synced, chat: Chat, history: list[Line], new, kept: list[int | None], *, answered: bool) -> Synced:
    """The history's messages at positions `new` (at its end) appended, and how the reply is asked for: a draft
    answered only, or a continuation of the history's last reply."""
    new = list(new)
    if new:
        first = chat.message_count
        chat = appended(chat, [message_value(chat, history[n]) for n in new])
        synced.written["appended"] += len(new)
        synced.indices[new[0] : new[-1] + 1] = range(first, first + len(new))
    if answered:
        synced.mode = Generation.Mode.IMPERSONATE
    elif history[-1].role == "assistant":
        synced.mode = Generation.Mode.CONTINUE
    synced.chat = chat
    synced.indices = [*kept, *synced.indices]
    return synced


def dropped_written(
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
        chat = patched(chat, [{"op": "add", "path": f"/{index}/is_system", "value": True} for index in gone])
        held = [*stored.indices[:same], *stored.indices[same + dropped :]]
    else:
        chat = patched(chat, [{"op": "remove", "path": f"/{index}"} for index in reversed(gone)])
        held = [*stored.indices[:same], *[index - dropped for index in stored.indices[same + dropped :]]]
    synced = Synced(chat, indices=[*kept, *held, *[None] * (len(history) - len(held))])
    synced.written["hidden" if hide else "deleted"] = dropped
    return asked(synced, history, len(held), answered=answered)


def inserted_written(
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
    same, hidden = hidden_at(chat, history, stored, same, inserted)
    if hidden:
        operations = [{"op": "add", "path": f"/{index}/is_system", "value": False} for index, _, _ in hidden]
        placed = [index for index, _, _ in hidden]
        later = 0  # the chat's messages keep their indices
    else:
        at = stored.indices[same]
        lines = history[same : same + inserted]
        operations = [
            {"op": "add", "path": f"/{at + n}", "value": message_value(chat, line)} for n, line in enumerate(lines)
        ]
        placed = list(range(at, at + inserted))
        later = inserted
    chat = patched(chat, operations)
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
    return asked(synced, history, len(held), answered=answered)


def shown_written(
    chat: Chat,
    history: list[Line],
    stored: HistoryDigests,
    shown: dict[int, int],
    kept: list[int | None],
    *,
    answered: bool,
) -> Synced:
    """The chat's hidden messages `shown` (by index: their position in the history) shown again; the others kept."""
    chat = patched(chat, [{"op": "add", "path": f"/{index}/is_system", "value": False} for index in shown])
    synced = Synced(chat, indices=[None] * len(history))
    texts = dict(Message.objects.filter(chat=chat, index__in=list(shown)).values_list("index", "mes"))
    for index, n in shown.items():
        synced.indices[n] = index if texts[index] == history[n].content else None  # (not spaced otherwise)
    positions = set(shown.values())
    held = [n for n in range(len(history)) if n not in positions][: len(stored.indices)]
    for n, index in zip(held, stored.indices, strict=False):
        synced.indices[n] = index
    synced.written["shown"] = len(shown)
    synced.indices = [*kept, *synced.indices]
    return asked(synced, history, len(stored.indices) + len(shown), answered=answered)


def aligned_written(
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
    leaves out deleted (`hide`: hidden from the model where they stand), the chat's hidden messages it says shown
    again, those it adds amid the chat added after the message before them, the others kept (each moved by as many
    places as were deleted and added before it), and what follows the chat's end appended, or the person's turn."""
    operations = edit_operations(chat, {stored.indices[reading.held[n]]: history[n].content for n in reading.edited})
    gone = [stored.indices[p] for p in reading.gone]
    if hide:
        operations += [{"op": "add", "path": f"/{index}/is_system", "value": True} for index in gone]
    else:
        operations += [{"op": "remove", "path": f"/{index}"} for index in reversed(gone)]
    removed = [] if hide else gone
    added: list[int] = []  # the chat's indices after which messages are added, one for each

    def moved(index: int) -> int:  # a kept message's index once the operations are written
        return index - bisect.bisect_left(removed, index) + bisect.bisect_left(added, index)

    synced = Synced(chat, indices=[None] * len(history))
    operations += [{"op": "add", "path": f"/{moved(index)}/is_system", "value": False} for _, index in reading.shown]
    runs = _runs(stored, reading)
    for low, lines in runs:
        at = moved(low) + 1
        operations += [
            {"op": "add", "path": f"/{at + k}", "value": message_value(chat, history[n])} for k, n in enumerate(lines)
        ]
        added += [low] * len(lines)
    chat = patched(chat, operations)
    synced.chat = chat
    synced.written.update(edited=len(reading.edited), appended=len(reading.added))
    synced.written["hidden" if hide else "deleted"] = len(gone)
    if reading.shown:
        synced.written["shown"] = len(reading.shown)
    spaced = set(reading.spaced)  # held as sent, not as the chat holds it: no index (as the comparison gives none)
    for n, p in enumerate(reading.held):
        if p is not None and n not in spaced:
            synced.indices[n] = moved(stored.indices[p])
    for n, index in reading.shown:
        if n not in spaced:
            synced.indices[n] = moved(index)
    for low, lines in runs:
        synced.indices[lines[0] : lines[-1] + 1] = range(moved(low) + 1, moved(low) + 1 + len(lines))
    placed = {*reading.added, *(n for n, _ in reading.shown)}
    new = [n for n, p in enumerate(reading.held) if p is None and n not in placed]
    if new and history[new[-1]].role == "user" and not answered:
        synced.message, new = history[new[-1]].content, new[:-1]
    if reading.regenerate:  # (the history ends with the person's turn, and is not answered only)
        synced.mode = Generation.Mode.SWIPE
    return ended(synced, chat, history, new, kept, answered=answered)


def _runs(stored: HistoryDigests, reading: Reading) -> list[tuple[int, list[int]]]:
    """The reading's messages added amid the chat, in runs: the chat's index of the message before each run (the
    history's message before it is the chat's, or one of its hidden ones shown again), and its history positions."""
    shown = dict(reading.shown)
    runs: list[tuple[int, list[int]]] = []
    for n in reading.added:
        if runs and runs[-1][1][-1] == n - 1:
            runs[-1][1].append(n)
        else:
            before = reading.held[n - 1]
            runs.append((stored.indices[before] if before is not None else shown[n - 1], [n]))
    return runs
