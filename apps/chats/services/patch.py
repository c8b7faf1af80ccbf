"""RFC 6902 JSON Patch against a chat's message array: `/5`, `/5/mes`, `/5/extra/ns/key`, `/-`."""

from __future__ import annotations

import bisect
import itertools
import uuid
from typing import Any

from django.db import transaction
from django.db.models import F

from apps.chats.jsonl import MESSAGE_FIELDS, split_fields
from apps.chats.models import Chat, Message
from apps.chats.services.chats import (
    MESSAGE_COLUMNS,
    chat_lock,
    chat_touch,
    message_line,
    message_row,
    message_rows_insert,
)
from apps.chats.services.writes import WriteResult
from apps.common import jsonpatch
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason

MAX_PATCH_OPERATIONS = jsonpatch.MAX_OPERATIONS


class _MessageArray:
    """The chat's messages as the JSON array an RFC 6902 patch addresses, loaded a message at a time.

    Edits inside a message stay in memory until `flush`. Whole messages inserted at consecutive positions are only
    noted (`adding`: where the first goes, and the messages) until another operation reads or writes a message: then
    the following indices are shifted in one UPDATE (the unique index constraint is deferred for this) and the block
    inserted at once, so a block of messages put back amid a chat is not an UPDATE of every later message for each.
    Removed messages are likewise only noted (`gone`, by their stored index): a run of removes, as a block deleted in
    a front end arrives, is then one DELETE and one UPDATE for each stretch of messages after a gap, not a DELETE and
    an UPDATE of every later message for each message removed. At most one of `adding` and `gone` holds anything, and
    while either does, nothing is loaded or dirty."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self.loaded: dict[int, dict[str, Any]] = {}
        self.dirty: set[int] = set()
        self.gone: list[int] = []  # sorted
        self.adding: tuple[int, list[dict[str, Any]]] | None = None
        self.peeked: dict[int, dict[str, Any]] = {}  # stored messages read while `adding`, by their stored index
        # The messages the patch's operations address inside (`/5/mes`), read together when the first is: a patch
        # editing 500 messages read them in 500 queries. Forgotten once a message is inserted or removed (the
        # indices shift).
        self.wanted: set[int] = set()

    def position(self, token: str, *, allow_end: bool) -> int:
        return jsonpatch.array_index(token, self.chat.message_count, allow_end=allow_end)

    def message(self, index: int) -> dict[str, Any]:
        self._settle()
        if index not in self.loaded and index in self.wanted:
            rows = Message.objects.filter(chat=self.chat, index__in=self.wanted - self.loaded.keys())
            for row in rows.values("index", *MESSAGE_COLUMNS):
                self.loaded[row.pop("index")] = message_line(row)
            self.wanted.clear()
        if index not in self.loaded:
            row = Message.objects.filter(chat=self.chat, index=index).values(*MESSAGE_COLUMNS).get()
            self.loaded[index] = message_line(row)
        return self.loaded[index]

    def current(self, index: int) -> dict[str, Any]:
        """The message now at `index`, read without writing the messages being inserted (a retried insert is
        compared with what stands at its place)."""
        if self.adding is None:
            return self.message(index)
        start, block = self.adding
        if start <= index < start + len(block):
            return block[index - start]
        stored = index - len(block) if index >= start else index
        if stored not in self.peeked:  # (a block inserted in order is compared with one message: the one after it)
            row = Message.objects.filter(chat=self.chat, index=stored).values(*MESSAGE_COLUMNS).get()
            self.peeked[stored] = message_line(row)
        return self.peeked[stored]

    def get(self, tokens: list[str]) -> Any:
        message = self.message(self.position(tokens[0], allow_end=False))
        return jsonpatch.get(message, tokens[1:])

    def add(self, tokens: list[str], value: Any) -> None:
        if len(tokens) == 1:
            self._insert(self.position(tokens[0], allow_end=True), _as_message(value))
            return
        index = self.position(tokens[0], allow_end=False)
        self._set(index, jsonpatch.add(self.message(index), tokens[1:], value))

    def remove(self, tokens: list[str]) -> None:
        index = self.position(tokens[0], allow_end=False)
        if len(tokens) == 1:
            self._delete(index)
        else:
            self._set(index, jsonpatch.remove(self.message(index), tokens[1:]))

    def replace(self, tokens: list[str], value: Any) -> None:
        index = self.position(tokens[0], allow_end=False)
        if len(tokens) == 1:
            self._set(index, _as_message(value))
            return
        message = self.message(index)
        jsonpatch.get(message, tokens[1:])  # must exist
        self._set(index, jsonpatch.add(jsonpatch.remove(message, tokens[1:]), tokens[1:], value))

    def _set(self, index: int, message: Any) -> None:
        self._settle()
        self.loaded[index] = _as_message(message)
        self.dirty.add(index)

    def _insert(self, index: int, message: dict[str, Any]) -> None:
        if self.adding is not None and index == self.adding[0] + len(self.adding[1]):
            self.adding[1].append(message)  # the next of a block
        else:
            self.flush()
            self.adding = (index, [message])
        self.chat.message_count += 1
        self.loaded.clear()
        self.wanted.clear()

    def _added(self) -> None:
        """The messages being inserted written: the following ones shifted past them, then the block."""
        if self.adding is None:
            return
        start, block = self.adding
        self.adding = None
        self.peeked.clear()
        Message.objects.filter(chat=self.chat, index__gte=start).update(index=F("index") + len(block))
        rows = [message_row(index=start + n, line=message) for n, message in enumerate(block)]
        message_rows_insert(chat_id=self.chat.pk, rows=rows)

    def _delete(self, index: int) -> None:
        self.flush(settle=False)  # (the messages being inserted written)
        stored = index  # the position counts the messages noted as gone before it: skip them
        for gone in self.gone:
            if gone > stored:
                break
            stored += 1
        bisect.insort(self.gone, stored)
        self.chat.message_count -= 1
        self.loaded.clear()
        self.wanted.clear()

    def _settle(self) -> None:
        """The messages being inserted written; the removed messages deleted, and each stretch of messages after
        them moved back by the number removed before it."""
        self._added()
        if not self.gone:
            return
        Message.objects.filter(chat=self.chat, index__in=self.gone).delete()
        for removed, (gone, following) in enumerate(itertools.pairwise([*self.gone, None]), start=1):
            if following != gone + 1:  # a stretch of kept messages starts after `gone`
                stretch = Message.objects.filter(chat=self.chat, index__gt=gone)
                if following is not None:
                    stretch = stretch.filter(index__lt=following)
                stretch.update(index=F("index") - removed)
        self.gone.clear()

    def flush(self, *, settle: bool = True) -> None:
        self._added()
        for index in sorted(self.dirty):
            columns, other, absent = split_fields(self.loaded[index], MESSAGE_FIELDS)
            Message.objects.filter(chat=self.chat, index=index).update(
                **columns, other_fields=other, absent_fields=absent
            )
        self.dirty.clear()
        if settle:
            self._settle()


def _addressed_inside(operations: list[Any], count: int) -> set[int]:
    """The messages that operations address inside (`/5/mes`, `/5/swipes/0`), of those the chat has."""
    wanted = set()
    for op in operations:
        path = op.get("path") if isinstance(op, dict) else None
        if isinstance(path, str) and path.count("/") > 1:
            try:  # what the operation will be refused for, if anything, is said when it is applied
                wanted.add(jsonpatch.array_index(path.split("/")[1], count, allow_end=False))
            except jsonpatch.PatchError:
                continue
    return wanted


def _as_message(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise jsonpatch.PatchInvalid("a message must be a JSON object")
    return value


def _apply_to_messages(messages: _MessageArray, op: dict[str, Any], budget: jsonpatch.WriteBudget) -> bool:
    """One operation; False when it is an `add` of the message already at that index (a retry: skipped).
    Every value it writes is counted against `budget` (apps/common/jsonpatch.py says why)."""
    name, tokens = op["op"], jsonpatch.parse_pointer(op["path"])
    if not tokens:
        raise jsonpatch.PatchInvalid("operations address messages: /N, /N/field…, or /- to add at the end")
    if name == "add":
        value = budget.take(op["value"])
        if len(tokens) == 1 and tokens[0] != "-":
            index = messages.position(tokens[0], allow_end=True)
            if index < messages.chat.message_count and jsonpatch.json_equal(messages.current(index), value):
                return False
        messages.add(tokens, value)
    elif name == "remove":
        messages.remove(tokens)
    elif name == "replace":
        messages.replace(tokens, budget.take(op["value"]))
    elif name == "test":
        if not jsonpatch.json_equal(messages.get(tokens), op["value"]):
            raise jsonpatch.PatchConflict(f"test failed at {op['path']!r}")
    else:
        source = jsonpatch.parse_pointer(op["from"])
        if not source:
            raise jsonpatch.PatchInvalid("'from' must address a message or a field in one")
        if name == "copy":
            messages.add(tokens, budget.take(messages.get(source)))
        else:
            if tokens[: len(source)] == source and tokens != source:
                raise jsonpatch.PatchConflict("cannot move a value into one of its own children")
            moved = messages.get(source)  # leaves its place, so it needs no copy
            messages.remove(source)
            messages.add(tokens, moved)
    return True


@transaction.atomic
def chat_patch(*, chat: Chat, operations: list[Any], integrity: uuid.UUID, mirror: bool = False) -> WriteResult:
    """RFC 6902 JSON Patch against the chat's message array (header excluded), all operations or none.

    `/5` addresses message 5, `/5/mes` a field in it, `/5/extra/ns/key` deeper, `/-` the end. An `add` whose value
    equals the message already at that index counts as already applied (skipped), as in Luker (docs/GLOSSARY.md). A
    patch writes at most LOREKEEPER_MAX_JSON_BYTES (413 `patch_too_large` naming the operation that would pass it)."""
    if not isinstance(operations, list) or not operations:
        raise ApplicationError("`operations` must be a non-empty JSON array.", {"field": "operations"})
    if len(operations) > MAX_PATCH_OPERATIONS:
        raise ApplicationError(f"At most {MAX_PATCH_OPERATIONS} operations per patch.", {"field": "operations"})
    chat = chat_lock(chat=chat, integrity=integrity)
    messages = _MessageArray(chat)
    messages.wanted = _addressed_inside(operations, chat.message_count)
    result = WriteResult(chat=chat)
    budget = jsonpatch.WriteBudget()
    changed = False
    for i, op in enumerate(operations):
        try:
            jsonpatch.validate_operation(op)
            reason = unstorable_reason(op)
            if reason:
                raise jsonpatch.PatchInvalid(f"the operation {reason}")
            if _apply_to_messages(messages, op, budget):
                result.applied += 1
                changed = changed or op["op"] != "test"
            else:
                result.skipped += 1
        except jsonpatch.PatchError as exc:
            exc.op_index = i
            raise jsonpatch.as_application_error(exc) from exc
    messages.flush()
    if changed:
        chat_touch(chat=chat, fields=["message_count"], mirror=mirror)
    return result
