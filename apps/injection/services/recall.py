"""Persistent recall (ST-BME's recall card, docs/GLOSSARY.md): what a turn's triggered recall found is kept on the user
message it served, in `extra.bme_recall` (ST-BME's record, with the memories, their scores and the subgraph they form
added), so a regeneration or a swipe of the reply is given the same recall, and a person can read, edit, delete or
re-run it.

Priority when building a context: a new recall this round is used and written back to the user turn; with none
this round (no pending message: a regeneration), the stored recall of the user turn being answered is used; with
neither, the triggered slot is empty. A recall a person edited is kept when the same message is asked about again;
re-running overwrites it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.chats.services.extension_data import extension_data_put
from apps.common.exceptions import ApplicationError
from apps.injection.models import InjectionState
from apps.injection.services.budgets import budgets_for, classify_turn
from apps.injection.services.settings import SLOT, InjectionSettings, injection_settings_get
from apps.injection.services.slots import Filled, Item, Scope, fit, render, responder_of
from apps.llm.tokens import count_tokens
from apps.memories.models import Kind
from apps.memories.search.ranking import SearchOutcome, memory_search
from apps.memories.selectors import memory_graph

NAMESPACE = "bme_recall"
LABEL = "Recalled for this turn"
MAX_TEXT = 20000
# What triggered recall searches: every extracted kind, and chat turns older than those in the prompt anyway.
RECALL_KINDS = [k for k in Kind.values if k not in (Kind.SUMMARY, Kind.PROFILE, Kind.CANON)]


@dataclass
class Recalled:
    filled: Filled
    method: str
    hits: list[dict] = field(default_factory=list)  # {id, kind, score} of what went in
    embed_ms: float = 0.0
    search_ms: float = 0.0


def _normal(text: str) -> str:
    return " ".join((text or "").split())


def recall_target(*, chat: Chat, message: str | None) -> Message | None:
    """The user turn a recall serves: the chat's last user message — when a pending message is given, only if it
    is that message (a client asking before it appended the message gets its recall in the answer only). Read
    narrow: what a recall reads of it (its text and its extension data, which hold the kept recall), not its
    swipes, before every reply."""
    last = (
        Message.objects.filter(chat=chat, is_user=True)
        .only("chat_id", "index", "is_user", "mes", "extra")
        .order_by("-index")
        .first()
    )
    if last is None or (message and _normal(last.mes) != _normal(message)):
        return None
    return last


def recall_stored(message: Message | None) -> dict[str, Any] | None:
    """The user turn's kept recall (recall_readable), or None."""
    return recall_readable((message.extra or {}).get(NAMESPACE) if message is not None else None)


def recall_readable(data: Any) -> dict[str, Any] | None:
    """A kept recall record as what reads it expects it, or None when it has no injection text. A record may come
    from a client (an imported chat, the extension's sync), so its lists are made lists of objects, what else they
    held left out: `memories`, `prompt` and each prompt entry's `memories`. Keys it lacks stay absent."""
    if not isinstance(data, dict) or not isinstance(data.get("injectionText"), str):
        return None
    record = dict(data)
    if "memories" in record:
        record["memories"] = _objects(record["memories"])
    if "prompt" in record:
        record["prompt"] = [
            entry | ({"memories": _objects(entry["memories"])} if "memories" in entry else {})
            for entry in _objects(record["prompt"])
        ]
    return record


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


@dataclass
class RecallAsked:
    """The user turn a recall is kept on, its kept recall, and the new search for the pending message (None: no
    new search, the stored recall serves)."""

    target: Message | None
    stored: dict[str, Any] | None
    found: SearchOutcome | None = None


def turns_left_out(settings: InjectionSettings, *, end: int, shown_from: int | None = None) -> int:
    """The first of the chat's turns a recall leaves out, the prompt holding them: from `shown_from` when the caller
    knows, else the last `recent_messages` before `end`; every turn when the settings recall none."""
    if not settings.recall_messages:
        return -1
    return end - settings.recent_messages if shown_from is None else shown_from


def recall_asked(
    *,
    user: AbstractUser,
    chat: Chat,
    scope: Scope,
    message: str,
    settings: InjectionSettings,
    shown_from: int | None = None,
    embedded: Callable[[], object] | None = None,
) -> RecallAsked:
    """A context build's search for the turn, before the other slots are filled: a new one for the pending
    message, unless the stored recall of that same message was edited by a person. The chat's turns the prompt holds
    are not searched: from `shown_from` on when the caller knows, else the last `recent_messages`; all of them when
    the settings recall no turns. `embedded`: called once the search's query is embedded (memory_search), if a
    search runs."""
    target = recall_target(chat=chat, message=message or None)
    asked = RecallAsked(target, recall_stored(target))
    if not message or not (settings.enabled["triggered"] or settings.unified):
        return asked
    stored = asked.stored
    edited = stored is not None and stored.get("manuallyEdited")
    if edited and _normal(message) == _normal(str(stored.get("recallInput", ""))):
        return asked  # the person's edit of this message's recall is kept
    turns_from = turns_left_out(settings, end=chat.message_count, shown_from=shown_from)
    asked.found = recall_find(
        user=user, scope=scope, query=message, limit=settings.triggered_limit, turns_from=turns_from, embedded=embedded
    )
    return asked


def recall_search(
    *,
    user: AbstractUser,
    scope: Scope,
    query: str,
    budget: int,
    limit: int,
    exclude: set[int],
    turns_from: int | None,
) -> Recalled:
    """The pending message (split into sentences by the search) against the chat's memories with the memory
    store's multi-signal ranking; memories already in another slot, and chat turns from `turns_from` on (they are
    in the prompt anyway), are left out."""
    found = recall_find(user=user, scope=scope, query=query, limit=limit, turns_from=turns_from)
    return recall_fill(found, budget=budget, limit=limit, exclude=exclude)


def recall_find(
    *,
    user: AbstractUser,
    scope: Scope,
    query: str,
    limit: int,
    turns_from: int | None = None,
    embedded: Callable[[], object] | None = None,
) -> SearchOutcome:
    """recall_search's search, before what other slots hold is known: enough hits for `limit` once they are left
    out (recall_fill). The chat's turns from `turns_from` on are not searched: the prompt holds them, and they
    would take the places of turns it does not."""
    return memory_search(
        user=user,
        query=query,
        chat_id=scope.chat.pk,
        chat_characters=[character.pk for character in scope.characters],
        kinds=RECALL_KINDS,
        limit=max(limit * 3, 10),
        committed=True,  # a reply's preparation writes messages, never memories (they are indexed after it)
        fields=("kind", "content", "message_index"),  # what is read of each hit below
        embedded=embedded,
        turns_from=turns_from,
    )


def recall_fill(outcome: SearchOutcome, *, budget: int, limit: int, exclude: set[int]) -> Recalled:
    """What recall_find found (the turns the prompt holds left out there), left out what another slot holds, cut to
    the budget."""
    items: list[Item] = []
    for hit in outcome.results:
        memory = hit.memory
        if memory.pk in exclude:
            continue
        items.append(Item(memory.content, memory.pk, memory.kind, hit.score))
        if len(items) >= limit:
            break
    filled = fit(items, budget)
    hits = [{"id": i.memory_id, "kind": i.kind, "score": round(i.score or 0.0, 4)} for i in filled.items]
    timings = outcome.timings_ms
    return Recalled(filled, outcome.method, hits, timings.get("embed", 0.0), timings.get("search", 0.0))


def recall_subgraph(*, user_id: int, memory_ids: list[int], scores: dict[int, float]) -> dict[str, list[dict]]:
    """The memories a recall chose, the entities they name, and how they link (mentions, supersedes,
    contradicts): the nodes and edges the recall card draws."""
    memories = memory_graph(user_id=user_id, memory_ids=memory_ids)
    nodes: list[dict] = []
    edges: list[dict] = []
    entities: dict[int, tuple[int, str, str]] = {}
    chosen = {m.id for m in memories}
    for memory in memories:
        nodes.append(
            {
                "id": f"m{memory.id}",
                "type": "memory",
                "memory": memory.id,
                "kind": memory.kind,
                "label": memory.label,
                "score": scores.get(memory.id),
            }
        )
        for entity in memory.entities:
            entities[entity[0]] = entity
            edges.append({"source": f"m{memory.id}", "target": f"e{entity[0]}", "kind": "mentions"})
        if memory.superseded_by_id in chosen:
            edges.append({"source": f"m{memory.superseded_by_id}", "target": f"m{memory.id}", "kind": "supersedes"})
        for other in memory.contradicts:
            if other in chosen and memory.id < other:
                edges.append({"source": f"m{memory.id}", "target": f"m{other}", "kind": "contradicts"})
    nodes += [
        {"id": f"e{pk}", "type": "entity", "entity": pk, "kind": kind or "entity", "label": name}
        for pk, name, kind in entities.values()
    ]
    return {"nodes": nodes, "edges": edges}


def recall_record(
    *, user_id: int, recalled: Recalled, text: str, message: Message | None, query: str, hook: str
) -> dict[str, Any]:
    """ST-BME's `bme_recall` record (version 1), with the memories, scores and subgraph added."""
    now = timezone.now().isoformat()
    scores = {hit["id"]: hit["score"] for hit in recalled.hits}
    return {
        "version": 1,
        "injectionText": text,
        "selectedNodeIds": [f"m{hit['id']}" for hit in recalled.hits],
        "recallInput": query,
        "recallSource": "lorekeeper",
        "hookName": hook,
        "tokenEstimate": recalled.filled.injected,
        "createdAt": now,
        "updatedAt": now,
        "generationCount": 1,
        "manuallyEdited": False,
        "authoritativeInputUsed": message is not None and _normal(message.mes) == _normal(query),
        "boundUserFloorText": message.mes if message is not None else query,
        "method": recalled.method,
        "memories": recalled.hits,
        "subgraph": recall_subgraph(user_id=user_id, memory_ids=list(scores), scores=scores),
    }


# How a recall card names a slot ("Long-term: 1 memory").
CARD_LABEL = {"long": "Long-term", "short": "Story so far", "triggered": "Recalled"}
SNIPPET = 160


def prompt_entry(name: str, memories: list[dict]) -> dict[str, Any]:
    """One slot of a record's `prompt`: which memories reached the model through it."""
    return {
        "slot": name,
        "label": CARD_LABEL.get(name, SLOT[name].label),
        "count": len(memories),
        "memories": memories,
    }


def prompt_memories(items: list[Item]) -> list[dict]:
    return [{"id": i.memory_id, "kind": i.kind, "text": i.text[:SNIPPET]} for i in items if i.memory_id is not None]


def recall_with_prompt(record: dict[str, Any], prompt: list[dict]) -> dict[str, Any]:
    """The record with what the build put in the prompt, slot by slot (`prompt`): the recall card reads the counts
    from it, so the card cannot say "nothing" while a memory reached the model through another slot."""
    return {**record, "prompt": prompt}


def recall_empty(*, user_id: int, message: Message, query: str, hook: str) -> dict[str, Any]:
    """A record for a turn whose recall found nothing (it still says what else reached the prompt)."""
    nothing = Recalled(Filled(), "")  # found nothing: the card names no search method
    return recall_record(user_id=user_id, recalled=nothing, text="", message=message, query=query, hook=hook)


def recall_text(recalled: Recalled) -> str:
    return render(LABEL, recalled.filled)


def recall_store(
    *,
    chat: Chat,
    index: int,
    record: dict[str, Any] | None,
    integrity: uuid.UUID | None = None,
    mirror: bool = False,
    message: Message | None = None,
) -> Chat:
    """Write (or, with None, remove) a user message's recall; answers the chat with its new integrity. Given the
    integrity a client last saw, a chat changed since is a conflict (409), as for every write to a message.
    `mirror`: the client puts the same record into its SillyTavern file (see chat_touch). `message`: the one at
    `index`, when the caller has read it (a context build, its turn's target), not read again to be checked."""
    if message is None or message.index != index:
        message = Message.objects.filter(chat=chat, index=index).first()
    if message is None or not message.is_user:
        raise ApplicationError("A recall belongs to a user message.", {"field": "index"})
    if record is None and NAMESPACE not in (message.extra or {}):
        return chat  # nothing to remove: not a write
    _, chat = extension_data_put(
        chat=chat, index=index, namespace=NAMESPACE, value=record, integrity=integrity, mirror=mirror
    )
    return chat


def recall_edit(
    *, chat: Chat, index: int, text: str, integrity: uuid.UUID | None = None, mirror: bool = False
) -> tuple[dict[str, Any], Chat]:
    """A person's own injection text for the turn (kept when the same message is asked about again)."""
    message = Message.objects.filter(chat=chat, index=index).first()
    record = recall_stored(message)
    if record is None:
        raise ApplicationError("That message has no recall to edit.", {"field": "index"})
    text = text.strip()
    if len(text) > MAX_TEXT:
        raise ApplicationError(f"The recall text is at most {MAX_TEXT} characters.", {"field": "injection_text"})
    record = {
        **record,
        "injectionText": text,
        "manuallyEdited": True,
        "updatedAt": timezone.now().isoformat(),
        "tokenEstimate": count_tokens(text),
    }
    return record, recall_store(chat=chat, index=index, record=record, integrity=integrity, mirror=mirror)


def recall_rerun(
    *, user: AbstractUser, chat: Chat, index: int, integrity: uuid.UUID | None = None, mirror: bool = False
) -> tuple[dict[str, Any], Chat]:
    """Search again for the user message at `index` and overwrite its recall (a person's edit included)."""
    if chat.user_id != user.pk:
        raise ApplicationError("Unknown chat.", {"field": "chat"})
    message = chat.messages.filter(index=index).first()
    if message is None or not message.is_user:
        raise ApplicationError("A recall belongs to a user message.", {"field": "index"})
    if not message.mes.strip():
        raise ApplicationError("That message has no text to recall from.", {"field": "index"})
    settings = injection_settings_get(user=user)
    characters = list(chat.characters.order_by("id"))
    state = InjectionState.objects.filter(chat=chat).first()
    turn, _ = classify_turn(message.mes)
    budgets = budgets_for(settings, turn=turn, demand=state.demand if state else {})
    placed = {
        pk
        for name, slot in (state.slots if state else {}).items()
        if name not in ("triggered", "unified")
        for pk in slot.get("memory_ids", [])
    }
    search = recall_search(
        user=user,
        scope=Scope(user.pk, chat, characters, responder_of(chat, characters, None)),
        query=message.mes,
        budget=budgets["long"],
        limit=settings.triggered_limit,
        exclude=placed,
        turns_from=turns_left_out(settings, end=index),
    )
    text = recall_text(search)
    record = recall_record(
        user_id=user.pk, recalled=search, text=text, message=message, query=message.mes, hook="rerun"
    )
    # The other slots are as the turn's build left them; only what this turn recalls changes.
    before = (recall_stored(message) or {}).get("prompt") or []
    others = [entry for entry in before if entry.get("slot") != "triggered"]
    if search.filled.items:
        others.append(prompt_entry("triggered", prompt_memories(search.filled.items)))
    record = recall_with_prompt(record, others)
    return record, recall_store(chat=chat, index=index, record=record, integrity=integrity, mirror=mirror)
