"""The context builder (docs/GLOSSARY.md, slot): before each generation a client asks what to inject and gets the 13
named slots, each with its position, depth and role, the 11 `{{smartmemory-*}}` macros resolved, and a
SillyTavern-shaped payload (`setExtensionPrompt` arguments) it can apply as is — within the token budgets, with
trim statistics, the recall of the turn kept on its user message, and the build remembered as the content cache
that macros and unified mode read.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone

from apps.chats.models import Character, Chat, Message
from apps.common.beside import beside_committed
from apps.common.exceptions import ApplicationError
from apps.extraction.models import ContinuityCheck
from apps.injection.models import InjectionState
from apps.injection.services import recall as recalls
from apps.injection.services.budgets import budgets_for, classify_turn, demand_update
from apps.injection.services.macros import detected_macros
from apps.injection.services.settings import (
    IN_PROMPT,
    MACRO_SLOTS,
    SLOT,
    UNIFIED_ORDER,
    InjectionSettings,
    injection_settings_get,
)
from apps.injection.services.slots import (
    Filled,
    Gathered,
    Item,
    Scope,
    fit,
    fit_text_end,
    gather,
    render,
    repair_note,
    responder_of,
)
from apps.llm.tokens import count_tokens

TRIGGERED_SHARE = 0.5  # of the long-term budget kept for what the turn recalls
ST_POSITION = {IN_PROMPT: 0, "in_chat": 1}  # SillyTavern's extension_prompt_types
ST_ROLE = {"system": 0, "user": 1, "assistant": 2}  # extension_prompt_roles
LIST_TIERS = ("long", "session", "scenes", "arcs", "relationships", "state_ledger", "epistemic")
CHRONOLOGICAL = ("session", "scenes")  # chosen newest first, shown in story order
PROSE = ("short", "canon", "profiles", "repair")


@dataclass
class SlotContent:
    name: str
    text: str = ""
    tokens: int = 0
    memory_ids: list[int] = field(default_factory=list)
    delivery: str = "prompt"  # prompt | macro | off

    def as_dict(self, settings: InjectionSettings, label: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": label,
            "text": self.text if self.delivery == "prompt" else "",  # what to inject as an extension prompt
            "content": self.text,  # what the slot holds, however it is delivered
            "tokens": self.tokens,
            "position": SLOT[self.name].position,
            "depth": settings.depths[self.name],
            "role": "system",
            "enabled": settings.enabled[self.name],
            "delivery": self.delivery,
            "memory_ids": self.memory_ids,
        }


@dataclass
class Context:
    chat: Chat
    responder: Character | None
    turn: str
    turn_scores: dict[str, int]
    slots: dict[str, dict[str, Any]]
    macros: dict[str, str]
    sillytavern: list[dict[str, Any]]
    stats: dict[str, dict[str, int]]
    recall: dict[str, Any]
    timings_ms: dict[str, float]
    settings: InjectionSettings
    preview: bool

    @property
    def injected_tokens(self) -> int:
        return sum(slot["tokens"] for slot in self.slots.values() if slot["delivery"] == "prompt")


def context_build(
    *,
    user: AbstractUser,
    chat: Chat,
    message: str | None = None,
    character: Character | str | None = None,
    preview: bool = False,
    mirror: bool = False,
    characters: list[Character] | None = None,
    recall_from: int | None = None,
) -> Context:
    """Build the context for the next generation of `chat`. `message`: the pending user message (its recall is
    made and kept on that user turn when it is the chat's last one); none: a regeneration, which reuses the stored
    recall of the turn. `preview`: nothing is written (no recall stored, no repair note consumed, no statistics).
    `mirror`: the client writes the kept recall into its SillyTavern file too (see chat_touch). `characters`: the
    chat's, when read by the caller. `recall_from`: the chat's first turn the prompt holds, when the caller knows
    (else the last `recent_messages` are taken to be there): recall leaves them out."""
    started = time.perf_counter()
    if chat.user_id != user.pk:
        raise ApplicationError("Unknown chat.", {"field": "chat"})
    settings = injection_settings_get(user=user)
    characters = (
        sorted(characters, key=lambda c: c.pk) if characters is not None else list(chat.characters.order_by("id"))
    )
    responder = responder_of(chat, characters, character)
    scope = Scope(user.pk, chat, characters, responder)
    state = InjectionState.objects.filter(chat=chat).first()
    message = (message or "").replace("\x00", "").strip()
    turn, turn_scores = classify_turn(message)
    budgets = budgets_for(settings, turn=turn, demand=state.demand if state else {})
    timings: dict[str, float] = {}

    # The slots' memories are read beside the turn's recall search, on a connection of their own: both read only
    # memories, which a reply's preparation never writes (they are indexed after it; apps/common/beside.py). They
    # start once the search's query is embedded: on two cores the embedding then runs beside the search's text
    # ranking alone, and the slots' reading fills the time the search then waits on its KNN.
    gathering: list[Future] = []

    def gather_now() -> None:
        if not gathering:
            gathering.append(beside_committed(_gathered_timed, scope, budgets))

    asked = recalls.recall_asked(
        user=user, chat=chat, scope=scope, message=message, settings=settings, shown_from=recall_from,
        embedded=gather_now,
    )  # fmt: skip
    gather_now()  # no search ran
    mark = time.perf_counter()
    gathered, timings["gather"] = gathering[0].result()  # its own time beside the search; then the wait for it
    timings["gather_wait"] = (time.perf_counter() - mark) * 1000
    filled = _fill(gathered, budgets)
    # What another slot injects is not recalled again (a slot switched off, or outside the unified block, injects
    # nothing, so its memories may be recalled).
    shown = UNIFIED_ORDER if settings.unified else [name for name in filled if settings.enabled[name]]
    placed = {pk for name in shown for pk in filled[name].memory_ids}
    turn_recall = _turn_recall(
        user=user, message=message, settings=settings, asked=asked, placed=placed,
        budget=budgets["long"] - filled["long"].injected,
    )  # fmt: skip
    timings |= turn_recall.timings
    filled["triggered"] = turn_recall.triggered

    note = repair_note(chat) if settings.enabled["repair"] else None
    contents = _contents(filled, settings, responder, note)
    macros = _macros(contents, settings, characters)
    stats = {
        tier: {"budget": budgets[tier], "injected": filled[tier].injected, "full": filled[tier].full}
        for tier in budgets
    }
    stats["long"]["injected"] += turn_recall.triggered.injected  # the triggered slot draws on the long-term budget

    recall, record, target = turn_recall.summary, turn_recall.record, turn_recall.target
    recall["prompt"] = _in_prompt(filled, contents, settings, target)
    record = _record_with_prompt(user=user, record=record, target=target, message=message, prompt=recall["prompt"])
    if not preview:
        mark = time.perf_counter()
        chat = _commit(user, chat, state, contents, macros, stats, turn, target, record, note, mirror)
        timings["commit"] = (time.perf_counter() - mark) * 1000
        recall["stored"] = record is not None and target is not None
    timings["total"] = (time.perf_counter() - started) * 1000
    if record is not None:
        recall["bme_recall"] = record
    slots = _slots(contents, settings, responder)
    return Context(
        chat=chat,
        responder=responder,
        turn=turn,
        turn_scores=turn_scores,
        slots=slots,
        macros=macros,
        sillytavern=_sillytavern(slots),
        stats=stats,
        recall=recall,
        timings_ms={key: round(value, 2) for key, value in timings.items()},
        settings=settings,
        preview=preview,
    )


def _slots(contents: dict[str, SlotContent], settings: InjectionSettings, responder: Character | None) -> dict:
    """Each slot as the answer gives it, by its SillyTavern key."""
    return {SLOT[name].key: contents[name].as_dict(settings, _label(name, responder)) for name in SLOT}


def _fill(gathered, budgets: dict[str, int]) -> dict[str, Filled]:
    """Each tier's gathered memories cut to its budget; the long-term slot leaves room for the turn's recall."""
    raw, sizes = gathered.tiers, gathered.sizes
    filled: dict[str, Filled] = {"short": fit_text_end(raw["short"], budgets["short"])}
    reserve = int(budgets["long"] * TRIGGERED_SHARE)
    for tier in (*LIST_TIERS, "profiles", "canon"):
        budget = budgets[tier] - (reserve if tier == "long" else 0)
        filled[tier] = fit(raw[tier], budget, full=sizes.get(tier), chronological=tier in CHRONOLOGICAL)
    filled["short"].full = max(filled["short"].full, sizes.get("short", 0))
    return filled


@dataclass
class TurnRecall:
    """What the triggered slot holds this turn, where it came from (`summary`, as the answer reports it), and the
    record to keep on the user turn it serves (`target`), when there is a new one."""

    triggered: Filled
    summary: dict[str, Any]
    target: Message | None = None
    record: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)


def _gathered_timed(scope: Scope, budgets: dict[str, int]) -> tuple[Gathered, float]:
    started = time.perf_counter()
    return gather(scope, budgets), (time.perf_counter() - started) * 1000


def _turn_recall(*, user, message, settings, asked: recalls.RecallAsked, placed, budget) -> TurnRecall:
    """The turn's triggered recall: what the new search found that no other slot holds; else the stored recall
    of the turn being answered, as kept; else nothing."""
    target, stored = asked.target, asked.stored
    found = TurnRecall(
        triggered=Filled(),
        target=target,
        summary={"source": "none", "message_index": target.index if target else None, "stored": False, "memories": []},
    )
    if not (settings.enabled["triggered"] or settings.unified):
        return found
    if asked.found is not None:
        search = recalls.recall_fill(asked.found, budget=budget, limit=settings.triggered_limit, exclude=placed)
        found.timings = {"embed": search.embed_ms, "search": search.search_ms}
        if search.filled.items:
            found.triggered = search.filled
            text = recalls.recall_text(search)
            found.record = recalls.recall_record(
                user_id=user.pk, recalled=search, text=text, message=target, query=message, hook="context"
            )
            found.summary |= {"source": "new", "method": search.method, "memories": search.hits}
    if found.record is None and stored is not None and stored["injectionText"]:
        text = stored["injectionText"]  # as kept (a person may have edited it): injected as it is
        tokens = count_tokens(text) + 1
        found.triggered = Filled([Item(text)], tokens, tokens)
        edited = stored.get("manuallyEdited") is True  # a client's record may lack it
        found.summary |= {"source": "stored", "memories": stored.get("memories", []), "edited": edited}
    return found


def _in_prompt(filled, contents, settings, target) -> list[dict]:
    """Which memories reached the model this build, slot by slot (the recall card's counts): a slot switched off
    gave none; in unified mode its members reach the model through the one block."""
    unified = settings.unified and contents["unified"].delivery != "off"
    members = {*UNIFIED_ORDER, "triggered"}
    kept = recalls.recall_stored(target) or {}
    entries = []
    for name, content in contents.items():
        if name == "unified" or not content.text:
            continue
        if content.delivery == "off" and not (unified and name in members):
            continue
        memories = recalls.prompt_memories(filled[name].items) if name in filled else []
        if name == "triggered" and not memories:  # the kept recall, injected as its text: its memories as kept
            previous = [e for e in kept.get("prompt") or [] if e.get("slot") == "triggered"]
            memories = previous[0]["memories"] if previous else [
                {"id": m.get("id"), "kind": m.get("kind", "")} for m in kept.get("memories", [])
            ]  # fmt: skip
        if memories:
            entries.append(recalls.prompt_entry(name, memories))
    return entries


def _record_with_prompt(*, user, record, target, message, prompt) -> dict | None:
    """The record to keep (or answer) with what reached the prompt: a new recall's; else, for the turn being
    answered, its kept record, or an empty one, when what reached the prompt changed (else no write)."""
    if record is not None:
        return recalls.recall_with_prompt(record, prompt)
    if target is None:
        return None
    kept = recalls.recall_stored(target)
    if kept is not None:
        return None if kept.get("prompt") == prompt else recalls.recall_with_prompt(kept, prompt)
    if not prompt:
        return None  # nothing reached the model: no card to show
    empty = recalls.recall_empty(user_id=user.pk, message=target, query=message or target.mes, hook="context")
    return recalls.recall_with_prompt(empty, prompt)


def _sillytavern(slots: dict[str, dict]) -> list[dict]:
    """The slots as SillyTavern's setExtensionPrompt arguments, to apply as they are."""
    return [
        {
            "key": key,
            "value": slot["text"] if slot["enabled"] else "",
            "position": ST_POSITION[slot["position"]],
            "depth": slot["depth"],
            "scan": False,
            "role": ST_ROLE[slot["role"]],
        }
        for key, slot in slots.items()
    ]


def _label(name: str, responder: Character | None) -> str:
    if name == "epistemic" and responder is not None:
        return f"What {responder.name} knows"
    return SLOT[name].label


def _contents(
    filled: dict[str, Filled], settings: InjectionSettings, responder: Character | None, note: ContinuityCheck | None
) -> dict[str, SlotContent]:
    """Each slot's text, and how it is delivered: as a prompt, off (switched off, or replaced by the unified
    block), or (decided with the macros) by a macro."""
    contents: dict[str, SlotContent] = {}
    for name in SLOT:
        if name in ("unified", "repair"):
            continue
        part = filled[name]
        stored = name == "triggered" and part.items and not part.memory_ids  # a kept recall: its text as it is
        text = part.items[0].text if stored else render(_label(name, responder), part, prose=name in PROSE)
        contents[name] = SlotContent(name, text, part.injected if text else 0, part.memory_ids)
    repair_text = f"[{SLOT['repair'].label}]\n{note.repair_note}" if note else ""
    contents["repair"] = SlotContent("repair", repair_text, count_tokens(repair_text) + 1 if note else 0)
    # Unified: one block in Smart Memory's order (UNIFIED_ORDER), what the turn recalled beside the long-term
    # memories it draws on.
    members: list[str] = []
    for name in UNIFIED_ORDER:
        members += [name, "triggered"] if name == "long" else [name]
    parts = [contents[name] for name in members if contents[name].text]
    contents["unified"] = SlotContent(
        "unified",
        "\n\n".join(part.text for part in parts),
        sum(part.tokens for part in parts),
        [pk for part in parts for pk in part.memory_ids],
    )
    for name, content in contents.items():
        if not settings.enabled[name] or (name == "unified") != settings.unified:
            content.delivery = "off"  # switched off; in unified mode every other slot is in the one block
    return contents


def _macros(contents: dict[str, SlotContent], settings: InjectionSettings, characters: list[Character]) -> dict:
    """The 11 macros' text. Active: the ones found in the characters' cards, or all in force mode; with unified
    mode on, only the unified one. A slot delivered by an active macro is not injected again as a prompt."""
    present = detected_macros(characters)
    macros: dict[str, str] = {}
    for name in MACRO_SLOTS:
        token = SLOT[name].macro
        active = settings.force_macros or name in present
        if settings.unified:
            active = active and name == "unified"
        elif name == "unified":
            active = False
        content = contents[name]
        macros[token] = content.text if active else ""
        if active and content.text and content.delivery == "prompt":
            content.delivery = "macro"
    return macros


@transaction.atomic
def _commit(user, chat, state, contents, macros, stats, turn, target, record, note, mirror=False) -> Chat:
    """What a real build leaves behind: the recall on its user turn, the repair note used up, the content cache
    and statistics, the demand auto-tune reads."""
    if record is not None and target is not None:
        chat = recalls.recall_store(chat=chat, index=target.index, record=record, mirror=mirror, message=target)
    if note is not None and contents["repair"].delivery != "off":
        ContinuityCheck.objects.filter(pk=note.pk).update(repair_consumed_at=timezone.now())
    state = state or InjectionState(chat=chat, user=user)
    # The content cache: what each slot held, and which memories it gave the model (a re-run of a recall leaves
    # those out, as the build did; a slot switched off gave none).
    state.slots = {
        name: {"text": c.text, "tokens": c.tokens, "memory_ids": c.memory_ids if c.delivery != "off" else []}
        for name, c in contents.items()
    }
    state.macros = macros
    state.stats = stats
    state.demand = demand_update(state.demand or {}, {tier: s["full"] for tier, s in stats.items()})
    state.turn_type = turn
    state.builds += 1
    state.built_at = timezone.now()
    state.save()
    return chat
