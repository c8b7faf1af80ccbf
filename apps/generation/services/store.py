"""Storing a reply as SillyTavern stores one, through the chat write path (integrity, indexing and extraction
follow as for any write): a new message with `swipes`, `swipe_id` and `swipe_info`; a new swipe on the last reply;
a continuation of it. A stopped or failed reply keeps what arrived, marked in `extra.lorekeeper`.

A reply is stored only if the chat still has the messages it was asked for (`Generation.expected_count`), and a
swipe or a continuation only onto the message it was asked for, unchanged (`Generation.extends`: its index and a
hash of what it says): when another tab or device wrote meanwhile, the reply is kept on the generation (state
`conflict`) and nothing is lost, nor moved.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.chats.services.chats import MESSAGE_COLUMNS, chat_lock, message_line
from apps.chats.services.patch import chat_patch
from apps.chats.services.start import send_date
from apps.chats.services.writes import chat_append
from apps.generation.models import Generation

STORED_STATES = (Generation.State.DONE, Generation.State.STOPPED, Generation.State.FAILED)


@dataclass
class Stored:
    generation: Generation
    chat: Chat | None = None
    message: dict[str, Any] | None = None


def _iso(moment: datetime | None) -> str | None:
    return send_date(moment) if moment else None


def _marks(generation: Generation) -> dict[str, Any]:
    """What SillyTavern keeps of a generation, and ours: which generation, and how it ended when not done."""
    extra: dict[str, Any] = {"api": generation.api, "model": generation.model}
    ours: dict[str, Any] = {"generation": str(generation.uid)}
    if generation.state != Generation.State.DONE:
        ours["state"] = generation.state
    if generation.stop_reason:
        ours["reason"] = generation.stop_reason
    return extra | {"lorekeeper": ours}


def message_fingerprint(message: Message) -> str:
    """A hash of what a message says and who says it, its swipes with it: the identity a swipe or a continuation
    extends. Not its `extra` (recall and other annotations are kept there without changing the message)."""
    said = [message.index, message.name, message.is_user, message.is_system, message.mes, message.swipes]
    said.append(message.swipe_id)
    return hashlib.sha256(json.dumps(said, ensure_ascii=False, default=str).encode()).hexdigest()


def extends_of(message: Message) -> dict[str, Any]:
    """What a swipe or a continuation records of the message it extends."""
    return {"index": message.index, "hash": message_fingerprint(message), "chars": len(message.mes or "")}


def _moved_on(generation: Generation, chat: Chat) -> bool:
    """Whether the chat is no longer as the reply was asked for: another count of messages, or (a swipe, a
    continuation) another message where the one it extends was."""
    if chat.message_count != generation.expected_count:
        return True
    if generation.mode not in (Generation.Mode.SWIPE, Generation.Mode.CONTINUE) or not generation.extends:
        return False
    last = Message.objects.filter(chat=chat, index=chat.message_count - 1).first()
    return last is None or extends_of(last)["hash"] != generation.extends.get("hash")


def _swipe_info(generation: Generation) -> dict[str, Any]:
    return {
        "send_date": _iso(generation.finished_at),
        "gen_started": _iso(generation.created_at),
        "gen_finished": _iso(generation.finished_at),
        "extra": _marks(generation),
    }


def _new_message(generation: Generation, text: str) -> dict[str, Any]:
    return {
        "name": generation.character_name,
        "is_user": False,
        "is_system": False,
        "send_date": _iso(generation.finished_at),
        "mes": text,
        "gen_started": _iso(generation.created_at),
        "gen_finished": _iso(generation.finished_at),
        "extra": _marks(generation),
        "swipes": [text],
        "swipe_id": 0,
        "swipe_info": [_swipe_info(generation)],
    }


def _swipe_operations(message: Message, generation: Generation, text: str) -> list[dict[str, Any]]:
    """A new swipe on the last reply, shown: one written before swipes existed gets them first."""
    at = f"/{message.index}"
    swipes = message.swipes if isinstance(message.swipes, list) else [message.mes]
    infos = message.swipe_info if isinstance(message.swipe_info, list) else [{} for _ in swipes]
    infos = (infos + [{} for _ in swipes])[: len(swipes)]
    return [
        {"op": "add", "path": f"{at}/swipes", "value": [*swipes, text]},
        {"op": "add", "path": f"{at}/swipe_info", "value": [*infos, _swipe_info(generation)]},
        {"op": "add", "path": f"{at}/swipe_id", "value": len(swipes)},
        {"op": "add", "path": f"{at}/mes", "value": text},
        {"op": "add", "path": f"{at}/gen_started", "value": _iso(generation.created_at)},
        {"op": "add", "path": f"{at}/gen_finished", "value": _iso(generation.finished_at)},
        {"op": "add", "path": f"{at}/extra", "value": (message.extra or {}) | _marks(generation)},
    ]


def continued(text: str, more: str) -> str:
    """`text` with `more` after it, a space between them where neither brings one (a stream's first delta may
    come without its leading space) unless `more` starts with punctuation."""
    if not text or not more or text[-1].isspace() or more[0].isspace() or more[0] in ",.;:!?…)]}\"'”’-—":
        return text + more
    return f"{text} {more}"


def _continue_operations(message: Message, generation: Generation, text: str) -> list[dict[str, Any]]:
    """The last reply with the continuation added, in its shown swipe too."""
    at = f"/{message.index}"
    joined = continued(message.mes, text)
    operations = [
        {"op": "add", "path": f"{at}/mes", "value": joined},
        {"op": "add", "path": f"{at}/gen_finished", "value": _iso(generation.finished_at)},
    ]
    if isinstance(message.swipes, list) and 0 <= (message.swipe_id or 0) < len(message.swipes):
        operations.append({"op": "replace", "path": f"{at}/swipes/{message.swipe_id or 0}", "value": joined})
    return operations


@transaction.atomic
def reply_store(*, generation: Generation, text: str, state: str, error: str = "", reason: str = "") -> Stored:
    """Record how the generation ended and store its reply in the chat (impersonate: never; nothing arrived:
    nothing stored). `reason`: the bound that stopped it (`error` then says so to the person). Called once per
    generation; a second call (a retry racing the first, a stream outliving its lease) changes nothing."""
    generation = Generation.objects.select_for_update().get(pk=generation.pk)
    if generation.state != Generation.State.STREAMING:
        return Stored(generation)
    generation.text, generation.state, generation.error, generation.stop_reason = text, state, error, reason
    generation.finished_at = timezone.now()
    stored = Stored(generation)
    if generation.mode != Generation.Mode.IMPERSONATE and text:
        chat = chat_lock(chat=generation.chat)
        if _moved_on(generation, chat):
            generation.state = Generation.State.CONFLICT
        else:
            stored = _into_chat(generation, chat, text)
    generation.save()
    stored.chat = stored.chat or Chat.objects.get(pk=generation.chat_id)
    return stored


def _into_chat(generation: Generation, chat: Chat, text: str) -> Stored:
    if generation.mode == Generation.Mode.NEW:
        chat = chat_append(chat=chat, messages=[_new_message(generation, text)], integrity=chat.integrity).chat
        index = chat.message_count - 1
        generation.swipe_id = 0
    else:
        last = Message.objects.get(chat=chat, index=chat.message_count - 1)
        if generation.mode == Generation.Mode.SWIPE:
            operations = _swipe_operations(last, generation, text)
            generation.swipe_id = len(last.swipes) if isinstance(last.swipes, list) else 1
        else:
            operations = _continue_operations(last, generation, text)
            generation.swipe_id = last.swipe_id
        chat = chat_patch(chat=chat, operations=operations, integrity=chat.integrity).chat
        index = last.index
    generation.message_index = index
    row = Message.objects.filter(chat=chat, index=index).values(*MESSAGE_COLUMNS).get()
    return Stored(generation, chat, message_line(row))
