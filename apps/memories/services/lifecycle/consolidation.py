"""Consolidation (as in Smart Memory, docs/GLOSSARY.md): the model merges near-identical memories of one kind in one
scope into fewer, richer ones; the merged-away memories are retired via supersession (kept, `superseded_by` the
merge)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.llm.client import UnreadableAnswer, complete_prompt
from apps.llm.models import Connection
from apps.llm.prompts import prompt_get
from apps.memories.embeddings import EmbeddingUnavailable, config_for, embed_texts
from apps.memories.models import ConsolidationCounter, Decision, Memory, Retired, Status
from apps.memories.services.lifecycle.scope import ScopeKey, lifecycle_config, scope_locked
from apps.memories.services.memories import memory_create

MEMORY_CHARS = 600


@dataclass
class Merge:
    members: list[Memory]
    content: str
    importance: int


def parse_merges(text: str, numbered: list[Memory]) -> list[Merge]:
    """The merges of a consolidation answer. Ids outside the list, groups of fewer than two, ids used twice and
    empty contents make the whole answer unreadable: a half-understood merge is worse than none."""
    # From the first brace to the last: a fence around the JSON (```json … ```) is left out with the rest. (A
    # pattern took the fences away first: on a run of spaces it backtracked through each, 20,000 of them 1.6 s.)
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if start >= 0 else None
        merges = data["merges"]
        if not isinstance(merges, list):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: "[[[[…" past the parser
        raise UnreadableAnswer(f"unreadable consolidation answer: {text[:200]!r}") from exc
    used: set[int] = set()
    result: list[Merge] = []
    for item in merges:
        try:
            ids = [int(i) for i in item["ids"]]
            content = str(item["content"]).strip()
            importance = min(3, max(1, int(item.get("importance") or 2)))
        except (KeyError, TypeError, ValueError) as exc:
            raise UnreadableAnswer(f"a merge lacks ids or content: {item!r}"[:300]) from exc
        if len(set(ids)) < 2 or not content or any(i < 1 or i > len(numbered) or i in used for i in ids):
            raise UnreadableAnswer(f"a merge names unknown, repeated or too few ids: {ids}")
        used.update(ids)
        result.append(Merge([numbered[i - 1] for i in dict.fromkeys(ids)], content, importance))
    return result


def _scope_label(scope: ScopeKey, sample: Memory) -> str:
    if scope.chat_id is not None:
        return f"the chat “{sample.chat.title}”" if sample.chat else "this chat"
    return sample.character.name if sample.character else "this character"


def consolidation_run(*, scope: ScopeKey, kind: str, connection: Connection) -> dict:
    """One merge pass over the newest `max_candidates` active memories of `kind` in `scope`. Raises LlmError
    (the caller records it on the job) when the model fails or answers something unreadable; nothing changes
    then."""
    ConsolidationCounter.objects.filter(
        user_id=scope.user_id, character_id=scope.character_id, chat_id=scope.chat_id, kind=kind
    ).update(count=0, last_consolidated_at=timezone.now())
    limit = lifecycle_config()["consolidation"]["max_candidates"]
    newest = (
        Memory.objects.filter(scope.q(), kind=kind, status=Status.ACTIVE)
        .exclude(data__has_key="history")  # relationship history: one reading per pair, a chain of its own
        .select_related("character", "chat")
    )
    numbered = list(reversed(newest.defer("embedding").order_by("-created_at", "-id")[:limit]))
    if len(numbered) < 2:
        return {"candidates": len(numbered), "merged": 0, "created": 0}
    listing = "\n".join(f"[{i}] {m.content[:MEMORY_CHARS]}" for i, m in enumerate(numbered, 1))
    completion = complete_prompt(
        connection,
        prompt_get("memories", "consolidation"),
        purpose="consolidation",
        kind=kind,
        scope=_scope_label(scope, numbered[0]),
        memories=listing,
    )
    try:
        merges = parse_merges(completion.text, numbered)
    except UnreadableAnswer as exc:
        exc.call = completion.call
        raise
    vectors, model_key = _embed([m.content for m in merges], numbered[0])
    created = merged = 0
    with scope_locked(scope):
        for merge, vector in zip(merges, vectors, strict=True):
            made = _apply(merge, kind=kind, vector=vector, model_key=model_key, call_id=completion.call.pk)
            if made:
                created += 1
                merged += len(merge.members)
    return {"candidates": len(numbered), "merged": merged, "created": created, "llm_call": completion.call.pk}


def _embed(texts: list[str], sample: Memory) -> tuple[list, str]:
    config = config_for(sample.user)
    if not texts or not config.enabled:
        return [None] * len(texts), ""
    try:
        return embed_texts(config, texts), config.key
    except EmbeddingUnavailable:
        return [None] * len(texts), ""


@transaction.atomic
def _apply(merge: Merge, *, kind: str, vector, model_key: str, call_id: int) -> Memory | None:
    """Store one merge, unless a member changed since the model read it (then the merge is skipped: it would
    overwrite an edit or revive a retired memory)."""
    current = Memory.objects.select_for_update().defer("embedding").in_bulk([m.pk for m in merge.members])
    if any(
        m.pk not in current or current[m.pk].status != Status.ACTIVE or current[m.pk].version != m.version
        for m in merge.members
    ):
        return None
    members = [current[m.pk] for m in merge.members]
    first = members[0]
    entities = {e.pk: {"name": e.name, "type": e.type} for m in members for e in m.entities.all()}
    starts = [m.valid_from for m in members if m.valid_from is not None]
    memory = memory_create(
        user=first.user,
        kind=kind,
        content=merge.content,
        character=first.character if first.chat_id is None else None,
        chat=first.chat,
        importance=max(merge.importance, *(m.importance for m in members)),
        confidence=max(m.confidence for m in members),
        entities=list(entities.values()),
        source_chat=first.source_chat,
        source_message_indices=sorted({i for m in members for i in m.source_message_indices}),
        embedding=vector,
        embedding_model=model_key,
        time_scope=first.time_scope,
        valid_from=min(starts) if starts else None,
        origin="consolidation",
    )
    for member in members:
        Decision.objects.create(
            user_id=first.user_id,
            memory=memory,
            related=member,
            outcome=Decision.Outcome.CONSOLIDATED,
            kind=kind,
            content=member.content,
            method="model",
            scores={"merged": [m.pk for m in members]},
            reason=f"#{member.pk} merged with {len(members) - 1} more into #{memory.pk}",
            llm_call_id=call_id,
        )
    Memory.objects.filter(pk__in=[m.pk for m in members]).update(
        status=Status.RETIRED, retired_reason=Retired.CONSOLIDATED, superseded_by=memory, version=F("version") + 1
    )
    return memory
