"""A chat completion through the gateway: the request's messages written into the chat they belong to, the memory
placed in the front end's own prompt as the web chat places it, the reply asked of the person's connection and
stored, all through generation's services (apps/generation/services/generate.py, stream.py): the same Generation
record, the same bounds, lease and caps on streams, the same storing of the reply. Then the answer in OpenAI's
shapes."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotency_lock
from apps.common.jsonsafe import text_storable
from apps.gateway.selectors import connection_for_model
from apps.gateway.services.match import chat_for_request
from apps.gateway.services.request import Line, messages_parse, options_parse
from apps.gateway.services.sync import Synced, history_sync
from apps.generation.models import Generation
from apps.generation.services.generate import generation_prepare
from apps.generation.services.lease import generation_lapse, streams_check
from apps.generation.services.lore_sent import lore_unsent
from apps.generation.services.prompt import Composing, Prompt, composing_lore, memory_placed
from apps.generation.services.stream import Event, open_streams, replay_event
from apps.injection.services.settings import SLOTS
from apps.llm.profiles import connection_context_size
from apps.llm.tokens import ESTIMATE, Tokenizer, tokenizer_for

CHAT_FIELD = "lorekeeper_chat"  # the body's field naming the chat, for front ends that send no header of their own
CUT = (Generation.Reason.LENGTH, Generation.Reason.CHARACTERS)


@dataclass
class Completion:
    generation: Generation
    model: str
    tokenizer: Tokenizer
    fresh: bool = True  # False: a retry with the same Idempotency-Key, answered with how the first one ended

    @property
    def id(self) -> str:
        return f"chatcmpl-{self.generation.uid.hex}"

    @property
    def created(self) -> int:
        return int(self.generation.created_at.timestamp())


# What a rendered memory slot begins with: its label alone on a line (apps/injection/services/slots.py `render`).
SLOT_HEADS = frozenset(f"[{slot.label}]" for slot in SLOTS)


def memory_carried(lines: list[Line]) -> bool:
    """Whether the front end's prompt carries Lorekeeper's memory already: two slots' heads or more on lines of their
    own. SillyTavern with Lorekeeper's extension on and its chat pointed at the gateway too sends such a prompt, and
    placing the memory again gave the model every block twice."""
    heads = {
        text.strip()
        for line in lines
        if line.role == "system"  # where the extension puts them; a history's lines are not read again
        for text in line.content.splitlines()
        if text.strip() in SLOT_HEADS
    }
    return len(heads) >= 2


def _composer(lines: list[Line], synced: Synced):
    """The prompt: the front end's messages as it sent them, the memory slots and the World Info the chat activates
    placed in them (an entry the front end's prompt already holds is not given twice)."""

    def compose(composing: Composing) -> Prompt:
        context = composing.context
        sent = [{"role": line.role, "content": line.content} for line in lines]
        tokenizer = tokenizer_for(composing.connection)
        lore, lore_info, held = None, None, set()
        messages, added = sent, []  # a front end's own task (synced.plain): its prompt as it came
        carried = not synced.plain and memory_carried(lines)
        if not synced.plain:
            lore, lore_info = composing_lore(composing, tokenizer, connection_context_size(composing.connection))
            if lore is not None:
                lore, held = lore_unsent(lore, sent)
            messages, added = memory_placed(
                sent, slots={} if carried else context.slots, macros=context.macros, speakers=composing.speakers,
                lore=lore, metadata=composing.chat.chat_metadata,
            )  # fmt: skip
        indices = list(synced.indices)
        if synced.message is not None and indices and synced.message == synced.message.strip():
            indices[-1] = composing.chat.message_count - 1  # the person's turn, appended since as it was sent
        kept, kept_added = prompt_kept(messages, added, lines, indices)
        info = {
            "client": "gateway",
            "added": kept_added,  # the kept prompt's messages Lorekeeper added: the memory
            "context_size": connection_context_size(composing.connection),
            "reply_tokens": composing.connection.reply_tokens,
            "history_messages": sum(line.role != "system" for line in lines),
            "left_out": 0,
            "slots": [name for name, slot in context.slots.items() if slot["enabled"] and slot["text"].strip()]
            if not synced.plain
            else [],
        }
        if carried:
            info["carried"] = True
            info["slots"] = []
        if lore_info:
            for shown in lore_info.get("entries", []):
                shown["held"] = (shown["world"], shown["uid"]) in held
            info["lorebook"] = lore_info
        count = tokenizer.count_messages(messages)
        prompt = Prompt(messages, count, tokenizer.name, tokenizer.exact, info["context_size"], info, kept=kept)
        if lore is not None and lore.timed_changed:
            prompt.timed = lore.timed_state
        return prompt

    return compose


def prompt_kept(
    messages: list[dict[str, str]], added: list[int], lines: list[Line], indices: list[int | None]
) -> tuple[list[dict[str, Any]], list[int]]:
    """The prompt as it is kept with the reply, and the positions in it of the messages Lorekeeper added. A front
    end sends the whole history with every turn: the messages the chat holds word for word are kept as runs of the
    chat's messages (`{"role": "chat", "from": 12, "to": 4998, "messages": 4987}`, its messages from index 12 to
    4998, system messages aside), not copied again with each reply; the rest (system prompts, the memory added, a
    text that differs from the chat's) as sent. `indices`: the chat's index of each history message (None: not
    held word for word). A run holds consecutive messages: one the front end did not send (cut after the greeting it
    kept, or hidden) ends it."""
    extra = set(added)
    kept: list[dict[str, Any]] = []
    kept_added: list[int] = []
    history = iter(indices)
    theirs = iter(lines)
    run: dict[str, Any] | None = None  # the run of the chat's messages `kept` ends with, if it ends with one
    for position, message in enumerate(messages):
        if position in extra:
            kept_added.append(len(kept))
            kept.append(message)
            run = None
            continue
        line = next(theirs)
        index = next(history) if line.role != "system" else None
        if index is None or message["content"] != line.content:
            kept.append(message)
            run = None
        elif run is not None and index == run["to"] + 1:
            run["to"] = index
            run["messages"] += 1
        else:
            run = {"role": "chat", "from": index, "to": index, "messages": 1}
            kept.append(run)
    return kept, kept_added


HOW_ANSWERED = ("stream", "stream_options")  # a retry may ask for the same reply streamed or not


def _digest(body: dict[str, Any]) -> str:
    asked = {key: value for key, value in body.items() if key not in HOW_ANSWERED}
    # A lone surrogate (dropped from the texts that are kept) is digested as it came: the same body, the same digest.
    return hashlib.sha256(
        json.dumps(asked, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    ).hexdigest()


def _replayed(user: AbstractUser, key: str, digest: str) -> Generation | None:
    """The generation an earlier request with this Idempotency-Key made (its lease lapsed first when its process
    died), or None; a key sent with another body is refused."""
    earlier = Generation.objects.select_related("chat", "connection").filter(user=user, idempotency_key=key).first()
    if earlier is None:
        return None
    if earlier.request.get("body") != digest:
        raise ApplicationError(
            "This Idempotency-Key was used for another request.", {"field": "Idempotency-Key"}, status=422,
            code="idempotency_key_reused",
        )  # fmt: skip
    if earlier.state == Generation.State.STREAMING and generation_lapse(generation_id=earlier.pk):
        earlier.refresh_from_db()
    return earlier


@transaction.atomic
def completion_prepare(
    *,
    user: AbstractUser,
    body: dict[str, Any],
    chat_header: str = "",
    idempotency_key: str = "",
    started: float | None = None,
    arrived: float | None = None,
) -> Completion:
    """Everything before the model is asked, in one transaction: a refusal (a bad field, the caps on streams)
    writes nothing. The chat is the one `chat_header` (X-Lorekeeper-Chat) or the body's `lorekeeper_chat` names,
    else the one the conversation is (services/match.py). A retry with the `idempotency_key` of an earlier
    request (a front end sending again after the connection dropped) is not written as a regenerate: it finds the
    generation the first one made (`fresh` False)."""
    lap = _Laps(started)  # `started`: when the view began reading the body
    if arrived is not None and started is not None:  # `arrived`: when the request reached the application
        lap.ms["gateway_receive"] = round((started - arrived) * 1000, 2)
    digest = _digest(body) if idempotency_key else ""
    if idempotency_key:
        idempotency_lock(user.pk, idempotency_key)  # a retry sent while the first is preparing waits for it
        earlier = _replayed(user, idempotency_key, digest)
        if earlier is not None:
            used = earlier.connection  # None once the person deleted it
            model = str(body.get("model") or (used.name if used else earlier.model))
            return Completion(earlier, model, tokenizer_for(used) if used else ESTIMATE, fresh=False)
    # Past a cap the request is refused before its history is parsed, matched and compared (generation_prepare
    # counts again under the person's lock): a person or a script sending over their cap costs the server little.
    streams_check(user=user, open_in_process=len(open_streams))
    lap("gateway_body")
    lines = messages_parse(body.get("messages"))
    model = body.get("model") or ""
    if not isinstance(model, str):
        raise ApplicationError("`model` is a string.", {"field": "model"})
    connection = connection_for_model(user=user, model=model)
    options = options_parse(body, connection)
    named = body.get(CHAT_FIELD)
    if named is not None and (
        isinstance(named, bool) or not isinstance(named, str | int) or not text_storable(str(named))
    ):
        raise ApplicationError(f"`{CHAT_FIELD}` is a chat id or a client key.", {"field": CHAT_FIELD})
    lap("gateway_parse")
    found = chat_for_request(user=user, lines=lines, header=chat_header or ("" if named is None else str(named)))
    lap("gateway_match")
    synced = history_sync(
        chat=found.chat, lines=lines, start=found.start, head=found.head, branch_key=found.branch_key,
        named=found.how == "header",
    )  # fmt: skip
    lap("gateway_sync")
    prepared = generation_prepare(
        user=user, chat=synced.chat, mode=synced.mode, message=synced.message, connection=connection,
        compose=_composer(lines, synced), options=options, idempotency_key=idempotency_key, body_digest=digest,
        timings=lap.ms, streams_checked=True, recall_from=_first_sent(synced), person_picks=False,
    )  # fmt: skip
    return Completion(prepared.generation, model or connection.name, tokenizer_for(connection))


def _first_sent(synced: Synced) -> int | None:
    """Where the unbroken run of the chat's turns that ends the request's history starts: the front end's prompt
    holds those turns, so the turn's recall leaves them out (recalled, they would reach the model twice). A gap
    before it is a turn the model is not sent (hidden in SillyTavern, which is how a person leaves it to memory):
    it and the turns before stay recallable. None when the history holds no turn word for word: the recall then
    leaves out the last `recent_messages`, as the web chat's does."""
    held = [index for index in synced.indices if index is not None]
    first = held[-1] if held else None
    for index in reversed(held[:-1]):
        if index != first - 1:
            break
        first = index
    return first


class _Laps:
    """The time of each step before the generation is prepared, in ms, kept with its other steps (bench/gateway.py
    prints them): the body received and the request authenticated (`gateway_receive`, under ASGI), the body read
    and checked, the history parsed, the chat found, the history compared and written. Generation's own steps
    follow, and its `total` counts only them."""

    def __init__(self, started: float | None) -> None:
        self.mark = time.perf_counter() if started is None else started
        self.ms: dict[str, float] = {}

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.ms[step] = round((now - self.mark) * 1000, 2)
        self.mark = now


async def completion_replayed(completion: Completion) -> AsyncIterator[Event]:
    """A retried request's events: the first request's reply, as one delta, then how it ended."""
    generation = completion.generation
    if generation.text and generation.state != Generation.State.FAILED:
        yield Event("delta", {"text": generation.text})
    yield await sync_to_async(replay_event)(generation)


def _finish(data: dict[str, Any]) -> str:
    return "length" if data.get("reason") in CUT else "stop"


def _usage(completion: Completion, text: str) -> dict[str, int]:
    prompt = completion.generation.prompt_tokens
    reply = completion.tokenizer.count(text)
    return {"prompt_tokens": prompt, "completion_tokens": reply, "total_tokens": prompt + reply}


def model_failed(data: dict[str, Any]) -> dict[str, Any]:
    """The error a failed reply answers: the model's failure (502 when not streamed), or Lorekeeper's own (500,
    `server_error`), so that a person is not sent to look at a model that did nothing wrong."""
    detail = data.get("detail") or "The model failed."
    if data.get("reason") in Generation.OUR_FAULTS:
        return {"error": {"message": f"Lorekeeper failed: {detail}", "type": "server_error", "param": None,
                          "code": "server_error"}}  # fmt: skip
    return {"error": {"message": detail, "type": "api_error", "param": None, "code": "model_failed"}}


def failed_status(data: dict[str, Any]) -> int:
    return 500 if data.get("reason") in Generation.OUR_FAULTS else 502


def completion_body(completion: Completion, event: Event) -> dict[str, Any]:
    """The non-streamed answer (`chat.completion`) from how the generation ended (done, stopped by a bound, or a
    conflict: the chat moved on meanwhile, the reply is answered but not stored)."""
    text = event.data.get("text") or ""
    return {
        "id": completion.id,
        "object": "chat.completion",
        "created": completion.created,
        "model": completion.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": _finish(event.data),
                "logprobs": None,
            }
        ],
        "usage": _usage(completion, text),
    }


def _data(value: dict[str, Any] | str) -> bytes:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


async def completion_chunks(
    completion: Completion, events: AsyncGenerator[Event, None], *, include_usage: bool
) -> AsyncGenerator[bytes, None]:
    """The streamed answer: `chat.completion.chunk`s as the reply arrives, the last with its `finish_reason`, then
    the usage when asked (`stream_options.include_usage`), then `[DONE]`. A model failing mid-stream ends it with an
    `error` object, as OpenAI's API does."""
    base = {"id": completion.id, "object": "chat.completion.chunk", "created": completion.created,
            "model": completion.model}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        return _data(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    async with aclosing(events):  # closed with this stream: a reply left mid-way is stored as it was left
        yield chunk({"role": "assistant", "content": ""}, None)
        async for event in events:
            if event.name == "delta":
                yield chunk({"content": event.data["text"]}, None)
            elif event.name == "error":
                yield _data(model_failed(event.data))
                yield _data("[DONE]")
                return
            elif event.name in ("done", "conflict"):
                yield chunk({}, _finish(event.data))
                if include_usage:
                    yield _data(base | {"choices": [], "usage": _usage(completion, event.data.get("text") or "")})
        yield _data("[DONE]")
