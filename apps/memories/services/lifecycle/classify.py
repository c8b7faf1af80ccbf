"""Classification of every candidate memory, from extraction or from the API (seed section 06, DE2–DE5).

For each candidate, against the active memories of the same owner and scope:
- an identical text of the same kind, a same-kind neighbour at or above the duplicate threshold, or another kind's
  at or above the cross-type threshold: **rejected** — not stored; the existing one is re-confirmed (confidence
  up, unconfirmed counter reset). A near-duplicate that carries state-change wording the other lacks ("no longer",
  "became", …) is a change, not a duplicate, and is treated as same-topic;
- a same-kind neighbour at or above the same-topic threshold: with state-change wording, **superseded** (the old one
  retired with `valid_to`, the new one stored with `valid_from` and `supersedes` it); otherwise the model is asked
  UPDATE / DUPLICATE / INDEPENDENT / CONTRADICTS: UPDATE supersedes, DUPLICATE rejects (a paraphrase below the
  threshold), CONTRADICTS stores the new one linked to the old in `contradicts` (both stay: a conflict is shown,
  never silently resolved), INDEPENDENT stores it as **uncertain** beside the old. Without a model, or when it
  fails, the candidate is kept as uncertain and the error noted;
- otherwise **passed**.
Similarity is cosine in pgvector when the candidate can be embedded, plus word-overlap (Jaccard) against memories
that have no vector of the current model; Jaccard alone when embeddings are off or down. Thresholds follow the
hardware profile of the user's default connection (settings LOREKEEPER_LIFECYCLE). Every outcome is a Decision
row with its scores.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone

from apps.chats.models import Character, Chat
from apps.common.exceptions import ApplicationError
from apps.llm.client import LlmError, complete_prompt
from apps.llm.models import Connection
from apps.llm.prompts import prompt_get
from apps.llm.selectors import connection_default
from apps.memories.embeddings import EmbeddingUnavailable, config_for, embed_texts, text_hash
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle import periods
from apps.memories.services.lifecycle.counters import consolidation_count
from apps.memories.services.lifecycle.hierarchy import user_time_zone
from apps.memories.services.lifecycle.neighbours import Neighbour, NeighbourFinder
from apps.memories.services.lifecycle.scope import DEDUP_KINDS, ScopeKey, lifecycle_config, scope_locked, thresholds
from apps.memories.services.lifecycle.similarity import state_change_cue
from apps.memories.services.memories import memory_create, scope_check

log = logging.getLogger(__name__)
Outcome = Decision.Outcome
_DEFAULT = object()
INTERACTIVE_TIMEOUT = 20.0
ANSWERS = {
    "UPDATE": "update",
    "DUPLICATE": "duplicate",
    "INDEPENDENT": "independent",
    "CONTRADICTS": "contradicts",
    "CONTRADICTION": "contradicts",
}


@dataclass
class Candidate:
    kind: str
    content: str
    importance: int = 2
    confidence: float | None = None
    time_scope: str = ""
    valid_from: int | None = None
    valid_to: int | None = None
    source_message_indices: list[int] = field(default_factory=list)
    entities: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    occurred_at: datetime | None = None
    source_instance: str = ""


@dataclass
class Classified:
    outcome: str
    memory: Memory | None  # the stored memory (None when rejected)
    related: Memory | None  # the existing memory it was judged against
    decision: Decision


@dataclass
class _Judgement:
    outcome: str
    related: Neighbour | None = None
    reason: str = ""
    scores: dict[str, Any] = field(default_factory=dict)
    llm_call_id: int | None = None


def _best(neighbours: list[Neighbour], *, same_kind: bool) -> Neighbour | None:
    pool = [n for n in neighbours if n.same_kind == same_kind]
    return max(pool, key=lambda n: n.similarity, default=None)


def _ask_model(
    connection: Connection, candidate: Candidate, old: Memory, *, interactive: bool
) -> tuple[str, str, int | None]:
    """(answer, error, call id): answer is update / duplicate / independent / contradicts, or "" when none. With a
    person waiting (`interactive`), one try of at most INTERACTIVE_TIMEOUT seconds: failing leaves it uncertain."""
    try:
        completion = complete_prompt(
            connection,
            prompt_get("memories", "supersession"),
            purpose="supersession",
            max_tokens=20,
            timeout=INTERACTIVE_TIMEOUT if interactive else None,
            retries=0 if interactive else None,
            kind=candidate.kind,
            old=old.content,
            new=candidate.content,
        )
    except LlmError as exc:
        return "", exc.message, exc.call.pk if exc.call else None
    tokens = completion.text.replace("*", " ").replace(".", " ").upper().split()
    answer = next((ANSWERS[t] for t in tokens[:1] if t in ANSWERS), "") or next(
        (ANSWERS[t] for t in tokens if t in ANSWERS), ""
    )
    error = "" if answer else f"unreadable answer: {completion.text[:120]!r}"
    return answer, error, completion.call.pk


def _judge(
    candidate: Candidate,
    neighbours: list[Neighbour],
    *,
    profile: str,
    connection: Connection | None,
    method: str,
    interactive: bool,
) -> _Judgement:
    limits = thresholds(profile)
    same, cross = _best(neighbours, same_kind=True), _best(neighbours, same_kind=False)
    scores: dict[str, Any] = {"profile": profile, "method": method}
    if same:
        scores |= {
            "same_kind": round(same.similarity, 4),
            "same_kind_method": same.method,
            "same_kind_id": same.memory.pk,
        }
    if cross:
        scores |= {
            "cross_type": round(cross.similarity, 4),
            "cross_type_method": cross.method,
            "cross_type_id": cross.memory.pk,
        }
    cue = state_change_cue(candidate.content)
    scores["cue"] = cue

    def limit(neighbour: Neighbour, name: str) -> float:
        table = limits["jaccard" if neighbour.method == "jaccard" else "embedding"]
        scores.setdefault("thresholds", {})[f"{neighbour.method}.{name}"] = table[name]
        return table[name]

    if same and (same.method == "hash" or same.similarity >= limit(same, "duplicate")):
        if not (cue and not state_change_cue(same.memory.content)):
            return _Judgement(
                Outcome.REJECTED, same, f"duplicate of #{same.memory.pk} ({same.method} {same.similarity:.2f})", scores
            )
    if cross and cross.similarity >= limit(cross, "cross_type"):
        return _Judgement(
            Outcome.REJECTED,
            cross,
            f"duplicate of #{cross.memory.pk}, a {cross.memory.kind} "
            f"({cross.method} {cross.similarity:.2f}, cross-type)",
            scores,
        )
    if not same or same.similarity < limit(same, "same_topic"):
        return _Judgement(Outcome.PASSED, same, "new: nothing on the same topic", scores)
    if cue:
        return _Judgement(
            Outcome.SUPERSEDED, same, f"same topic as #{same.memory.pk} and a state change (“{cue}”)", scores
        )
    if connection is None:
        return _Judgement(
            Outcome.UNCERTAIN,
            same,
            f"same topic as #{same.memory.pk}; no model connection to ask whether it is an update, so both are kept",
            scores,
        )
    answer, error, call_id = _ask_model(connection, candidate, same.memory, interactive=interactive)
    scores["model_answer"] = answer or None
    if error:
        scores["model_error"] = error
    if answer == "update":
        return _Judgement(
            Outcome.SUPERSEDED, same, f"same topic as #{same.memory.pk}; the model says UPDATE", scores, call_id
        )
    if answer == "duplicate":
        return _Judgement(
            Outcome.REJECTED,
            same,
            f"same as #{same.memory.pk} in other words (the model says DUPLICATE)",
            scores,
            call_id,
        )
    if answer == "contradicts":
        return _Judgement(
            Outcome.CONTRADICTION,
            same,
            f"contradicts #{same.memory.pk} (the model says CONTRADICTS): both kept and linked",
            scores,
            call_id,
        )
    if answer == "independent":
        return _Judgement(
            Outcome.UNCERTAIN, same, f"same topic as #{same.memory.pk}; the model says INDEPENDENT", scores, call_id
        )
    return _Judgement(
        Outcome.UNCERTAIN,
        same,
        f"same topic as #{same.memory.pk}; the model gave no answer ({error}), so both are kept",
        scores,
        call_id,
    )


def memory_reconfirm(*, memory: Memory, source_message_indices: list[int] = ()) -> None:
    """Seen again: confidence + boost (at most 1), unconfirmed counter back to 0, sources merged."""
    boost = lifecycle_config()["confidence"]["boost"]
    indices = sorted(set(memory.source_message_indices) | set(source_message_indices))
    Memory.objects.filter(pk=memory.pk).update(
        confidence=Least(F("confidence") + boost, 1.0),
        unconfirmed_count=0,
        source_message_indices=indices,
        version=F("version") + 1,
    )


def memory_supersede(*, old: Memory, new: Memory) -> None:
    """`new` replaces `old`: the old one is retired (kept, with its history) and holds until the new one's start."""
    valid_to = new.valid_from if new.valid_from is not None else old.valid_to
    Memory.objects.filter(pk=old.pk).update(
        status=Status.RETIRED,
        retired_reason="superseded",
        superseded_by=new,
        valid_to=valid_to,
        version=F("version") + 1,
    )


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
    judgement: _Judgement,
    character,
    chat,
    source_chat,
    vector: list[float] | None,
    model_key: str,
    method: str,
) -> Classified:
    related = judgement.related.memory if judgement.related else None
    if related is not None:
        # Another writer may have retired it while the model thought; then there is nothing left to compare with.
        current = Memory.objects.select_for_update().defer("embedding").filter(pk=related.pk).first()
        if judgement.outcome != Outcome.PASSED and (current is None or current.status != Status.ACTIVE):
            judgement = _Judgement(
                Outcome.PASSED, None, "new: the similar memory was retired meanwhile", judgement.scores
            )
            current = None
        related = current
    decision = Decision(
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
    if judgement.outcome == Outcome.REJECTED:
        memory_reconfirm(memory=related, source_message_indices=candidate.source_message_indices)
        decision.save()
        return Classified(judgement.outcome, None, related, decision)
    memory = memory_create(
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
    under a lock on the scope. `interactive` (an API request): the model gets one short try per question."""
    if connection is _DEFAULT:
        connection = connection_default(user_id=user.pk)
    for candidate in candidates:
        if candidate.kind == Kind.MESSAGE:
            raise ApplicationError("Message memories are made from the chat itself.", {"field": "kind"})
        scope_check(user=user, character=character, chat=chat, kind=candidate.kind)
        candidate.content = candidate.content.strip()
        if not candidate.content:
            raise ApplicationError("A memory needs content.", {"field": "content"})
        candidate.data = _with_period(user, candidate)
    scope = ScopeKey(user.pk, None if chat else character.pk, chat.pk if chat else None)
    profile = connection.effective_profile if connection else lifecycle_config()["default_profile"]
    finder = NeighbourFinder(scope, k=lifecycle_config()["neighbours"])
    results: list[Classified] = []
    for candidate in candidates:
        vector, model_key = _embed(user, candidate.content)
        with scope_locked(scope):
            judgement = _classify_one(
                candidate, finder, vector, model_key, profile=profile, connection=connection, interactive=interactive
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


def _classify_one(candidate, finder, vector, model_key, *, profile, connection, interactive) -> _Judgement:
    if candidate.kind not in DEDUP_KINDS:
        return _Judgement(
            Outcome.PASSED,
            None,
            f"{candidate.kind} memories are kept as written (not deduplicated)",
            {"profile": profile},
        )
    exact = finder.by_hash(kind=candidate.kind, content_hash=text_hash(candidate.content))
    if exact is not None:
        return _Judgement(
            Outcome.REJECTED,
            Neighbour(exact, 1.0, "hash", True),
            f"same text as #{exact.pk}",
            {"profile": profile, "method": "hash", "same_kind": 1.0, "same_kind_id": exact.pk},
        )
    neighbours: list[Neighbour] = []
    if vector is not None:
        neighbours += finder.by_vector(kind=candidate.kind, vector=vector, model_key=model_key)
    if vector is None or finder.has_vectorless(model_key):
        neighbours += finder.by_words(kind=candidate.kind, content=candidate.content, model_key=model_key or None)
    method = "embedding" if vector is not None else "jaccard"
    return _judge(
        candidate, neighbours, profile=profile, connection=connection, method=method, interactive=interactive
    )
