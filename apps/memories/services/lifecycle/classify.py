"""Classifying candidates into a scope, in order, and writing each outcome (the rules: judge.py)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone

from apps.chats.models import Character, Chat
from apps.common.exceptions import ApplicationError
from apps.llm.models import Connection
from apps.llm.selectors import connection_default
from apps.memories.embeddings import EmbeddingUnavailable, config_for, embed_texts, text_hash
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle import periods
from apps.memories.services.lifecycle.counters import consolidation_count
from apps.memories.services.lifecycle.hierarchy import user_time_zone
from apps.memories.services.lifecycle.judge import NO_CONNECTION, Candidate, Judgement, judge
from apps.memories.services.lifecycle.neighbours import Neighbour, NeighbourFinder
from apps.memories.services.lifecycle.scope import DEDUP_KINDS, ScopeKey, lifecycle_config, scope_locked, thresholds
from apps.memories.services.memories import memory_create, memory_reconfirm, memory_supersede, scope_check

log = logging.getLogger(__name__)
Outcome = Decision.Outcome
_DEFAULT = object()


@dataclass
class Classified:
    outcome: str
    memory: Memory | None  # the stored memory (None when rejected)
    related: Memory | None  # the existing memory it was judged against
    decision: Decision


def _valid_from(candidate: Candidate) -> int | None:
    if candidate.valid_from is not None:
        return candidate.valid_from
    return min(candidate.source_message_indices) if candidate.source_message_indices else None


@transaction.atomic
def _write(
    *,
    user,
    scope: ScopeKey,
    candidate: Candidate,
    judgement: Judgement,
    character,
    chat,
    source_chat,
    vector: list[float] | None,
    model_key: str,
    method: str,
) -> Classified:
    judgement, related = _recheck_related(judgement)
    decision = _decision(user=user, candidate=candidate, judgement=judgement, related=related, method=method)
    if judgement.outcome == Outcome.REJECTED:
        if not judgement.retired:
            memory_reconfirm(memory=related, source_message_indices=candidate.source_message_indices)
        decision.save()
        return Classified(judgement.outcome, None, related, decision)
    memory = _create_memory(
        user=user,
        candidate=candidate,
        character=character,
        chat=chat,
        source_chat=source_chat,
        vector=vector,
        model_key=model_key,
    )
    if judgement.outcome == Outcome.SUPERSEDED:
        memory_supersede(old=related, new=memory)
    elif judgement.outcome == Outcome.CONTRADICTION:
        memory.contradicts.add(related)
    decision.memory = memory
    decision.save()
    if candidate.kind in lifecycle_config()["consolidation"]["thresholds"]:
        consolidation_count(scope=scope, kind=candidate.kind)
    return Classified(judgement.outcome, memory, related, decision)


def _recheck_related(judgement: Judgement) -> tuple[Judgement, Memory | None]:
    """The judgement and the memory it was made against, that memory locked and read again (in the caller's
    transaction); a judgement against one no longer active becomes passed."""
    related = judgement.related.memory if judgement.related else None
    if related is None:
        return judgement, None
    # Another writer may have retired it while the model thought; then there is nothing left to compare with.
    current = Memory.objects.select_for_update().defer("embedding").filter(pk=related.pk).first()
    if judgement.retired:  # refused as like a retired memory: that it is retired is the point
        return judgement, current
    if judgement.outcome != Outcome.PASSED and (current is None or current.status != Status.ACTIVE):
        judgement = Judgement(Outcome.PASSED, None, "new: the similar memory was retired meanwhile", judgement.scores)
        current = None
    return judgement, current


def _decision(*, user, candidate: Candidate, judgement: Judgement, related: Memory | None, method: str) -> Decision:
    """The Decision row of the outcome, not saved yet (the stored memory is set on it first)."""
    return Decision(
        user=user,
        related=related,
        outcome=judgement.outcome,
        kind=candidate.kind,
        content=candidate.content,
        method=judgement.related.method if judgement.related else method,
        similarity=judgement.related.similarity if judgement.related else None,
        scores=judgement.scores,
        reason=judgement.reason,
        llm_call_id=judgement.llm_call_id,
    )


def _create_memory(
    *, user, candidate: Candidate, character, chat, source_chat, vector: list[float] | None, model_key: str
) -> Memory:
    return memory_create(
        user=user,
        kind=candidate.kind,
        content=candidate.content,
        character=character,
        chat=chat,
        importance=candidate.importance,
        confidence=candidate.confidence
        if candidate.confidence is not None
        else lifecycle_config()["confidence"]["default"],
        entities=candidate.entities,
        source_chat=source_chat,
        source_message_indices=candidate.source_message_indices,
        source_instance=candidate.source_instance,
        embedding=vector,
        embedding_model=model_key,
        time_scope=candidate.time_scope,
        valid_from=_valid_from(candidate),
        valid_to=candidate.valid_to,
        data=candidate.data,
        occurred_at=candidate.occurred_at,
        origin=candidate.origin,
    )


def _with_period(user, candidate: Candidate) -> dict[str, Any]:
    """Summaries of the hierarchy carry their period (`2026-W47`…), from `occurred_at` or today in the user's
    time zone when the writer did not give one."""
    data = dict(candidate.data or {})
    if candidate.kind in periods.LEVELS and data.get("period"):
        try:
            data["period"] = periods.parse_key(candidate.kind, str(data["period"])).key
        except ValueError as exc:
            example = periods.EXAMPLES[candidate.kind]
            raise ApplicationError(
                f"data.period of a {candidate.kind} memory looks like {example}.", {"field": "data"}
            ) from exc
    elif candidate.kind in periods.LEVELS:
        tz = user_time_zone(user.pk)
        moment = candidate.occurred_at or timezone.now()
        data["period"] = periods.containing(candidate.kind, moment.astimezone(tz).date()).key
    return data


def _embed(user, content: str) -> tuple[list[float] | None, str]:
    config = config_for(user)
    if not config.enabled:
        return None, ""
    try:
        return embed_texts(config, [content])[0], config.key
    except EmbeddingUnavailable as exc:
        log.warning("classifying without vectors: %s", exc)
        return None, ""


def memories_submit(
    *,
    user: AbstractUser,
    candidates: list[Candidate],
    character: Character | None = None,
    chat: Chat | None = None,
    source_chat: Chat | None = None,
    connection: Connection | None | object = _DEFAULT,
    interactive: bool = False,
) -> list[Classified]:
    """Classify and store candidates of one scope, in order (a later candidate is compared with the earlier ones
    stored). Not one transaction: each candidate is written atomically after the model, if asked, has answered,
    under a lock on the scope. `interactive` (an API request): the model gets one short try per question, and
    questions stop once the request has spent `interactive_budget` seconds (the rest are kept as uncertain)."""
    if connection is _DEFAULT:
        connection = connection_default(user_id=user.pk)
    _prepare(user=user, candidates=candidates, character=character, chat=chat)
    scope = ScopeKey(user.pk, None if chat else character.pk, chat.pk if chat else None)
    profile = connection.effective_profile if connection else lifecycle_config()["default_profile"]
    finder = NeighbourFinder(scope, k=lifecycle_config()["neighbours"])
    results: list[Classified] = []
    budget = lifecycle_config()["interactive_budget"]
    deadline = time.monotonic() + budget
    for candidate in candidates:
        vector, model_key = _embed(user, candidate.content)
        asking, no_model = _model_to_ask(connection, interactive=interactive, deadline=deadline, budget=budget)
        with scope_locked(scope):
            judgement = _classify_one(
                candidate,
                finder,
                vector,
                model_key,
                profile=profile,
                connection=asking,
                interactive=interactive,
                no_model=no_model,
            )
            if vector is None:
                finder.stored_vectorless()
            results.append(
                _write(
                    user=user,
                    scope=scope,
                    candidate=candidate,
                    judgement=judgement,
                    character=character,
                    chat=chat,
                    source_chat=source_chat or chat,
                    vector=vector,
                    model_key=model_key,
                    method="embedding" if vector is not None else "jaccard",
                )
            )
    return results


def _prepare(*, user, candidates: list[Candidate], character: Character | None, chat: Chat | None) -> None:
    """Check every candidate before any is classified, tidying each in place: content stripped, the period of a
    hierarchy summary set."""
    for candidate in candidates:
        if candidate.kind == Kind.MESSAGE:
            raise ApplicationError("Message memories are made from the chat itself.", {"field": "kind"})
        scope_check(user=user, character=character, chat=chat, kind=candidate.kind)
        candidate.content = candidate.content.strip()
        if not candidate.content:
            raise ApplicationError("A memory needs content.", {"field": "content"})
        candidate.data = _with_period(user, candidate)


def _model_to_ask(
    connection: Connection | None, *, interactive: bool, deadline: float, budget: float
) -> tuple[Connection | None, str]:
    """The connection to ask about the next candidate, and why there is none when there is not: a request past its
    interactive budget asks no more."""
    if interactive and connection is not None and time.monotonic() > deadline:
        return None, f"no time left in this request to ask the model (over {budget:g} s)"
    return connection, NO_CONNECTION


def _retired_by_person(candidate, finder, vector, model_key, *, profile) -> Judgement | None:
    """Extraction writing again what the person retired (the same text, or a duplicate's likeness) is refused: a
    memory taken out by hand stays out. A person writing it again (the API, the memories page) is not refused."""
    duplicate = thresholds(profile)["embedding"]["duplicate"]
    content_hash = text_hash(candidate.content)
    like = finder.retired_by_person(
        kind=candidate.kind, content_hash=content_hash, vector=vector, model_key=model_key, duplicate=duplicate
    )
    if like is None:
        return None
    memory = like.memory
    return Judgement(
        Outcome.REJECTED,
        like,
        f"like #{memory.pk}, which was retired by hand ({memory.retired_reason}; {like.method} {like.similarity:.2f})",
        {"profile": profile, "method": like.method, "same_kind": round(like.similarity, 4), "same_kind_id": memory.pk},
        retired=True,
    )


def _classify_one(candidate, finder, vector, model_key, *, profile, connection, interactive, no_model="") -> Judgement:
    if candidate.kind not in DEDUP_KINDS:
        return Judgement(
            Outcome.PASSED,
            None,
            f"{candidate.kind} memories are kept as written (not deduplicated)",
            {"profile": profile},
        )
    exact = finder.by_hash(kind=candidate.kind, content_hash=text_hash(candidate.content))
    if exact is not None:
        return Judgement(
            Outcome.REJECTED,
            Neighbour(exact, 1.0, "hash", True),
            f"same text as #{exact.pk}",
            {"profile": profile, "method": "hash", "same_kind": 1.0, "same_kind_id": exact.pk},
        )
    if candidate.origin == "extraction":
        refused = _retired_by_person(candidate, finder, vector, model_key, profile=profile)
        if refused is not None:
            return refused
    neighbours: list[Neighbour] = []
    if vector is not None:
        neighbours += finder.by_vector(kind=candidate.kind, vector=vector, model_key=model_key)
    if vector is None or finder.has_vectorless(model_key):
        neighbours += finder.by_words(kind=candidate.kind, content=candidate.content, model_key=model_key or None)
    method = "embedding" if vector is not None else "jaccard"
    return judge(
        candidate,
        neighbours,
        profile=profile,
        connection=connection,
        method=method,
        interactive=interactive,
        no_model=no_model or NO_CONNECTION,
    )
