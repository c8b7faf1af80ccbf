"""Classification of every candidate memory, from extraction or from the API (Smart Memory's dedup, extended:
docs/GLOSSARY.md).

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

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from apps.llm.client import LlmError, complete_prompt
from apps.llm.models import Connection
from apps.llm.prompts import prompt_get
from apps.memories.models import Decision, Memory
from apps.memories.services.lifecycle.neighbours import Neighbour
from apps.memories.services.lifecycle.scope import thresholds
from apps.memories.services.lifecycle.similarity import state_change_cue

Outcome = Decision.Outcome

INTERACTIVE_TIMEOUT = 20.0
NO_CONNECTION = "no model connection to ask whether it is an update"
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
    origin: str = ""  # api, extraction…: kept on the memory (a rebuild retires only what extraction wrote)


@dataclass
class Judgement:
    outcome: str
    related: Neighbour | None = None
    reason: str = ""
    scores: dict[str, Any] = field(default_factory=dict)
    llm_call_id: int | None = None
    retired: bool = False  # refused as like a memory the person retired: that one stays retired, nothing reconfirmed


def best(neighbours: list[Neighbour], *, same_kind: bool) -> Neighbour | None:
    pool = [n for n in neighbours if n.same_kind == same_kind]
    return max(pool, key=lambda n: n.similarity, default=None)


def ask_model(
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


def judge(
    candidate: Candidate,
    neighbours: list[Neighbour],
    *,
    profile: str,
    connection: Connection | None,
    method: str,
    interactive: bool,
    no_model: str = NO_CONNECTION,
) -> Judgement:
    limits = thresholds(profile)
    same, cross = best(neighbours, same_kind=True), best(neighbours, same_kind=False)
    scores = _neighbour_scores(same, cross, profile=profile, method=method)
    cue = state_change_cue(candidate.content)
    scores["cue"] = cue

    def limit(neighbour: Neighbour, name: str) -> float:
        table = limits["jaccard" if neighbour.method == "jaccard" else "embedding"]
        scores.setdefault("thresholds", {})[f"{neighbour.method}.{name}"] = table[name]
        return table[name]

    if same and (same.method == "hash" or same.similarity >= limit(same, "duplicate")):
        if not (cue and not state_change_cue(same.memory.content)):
            return Judgement(
                Outcome.REJECTED, same, f"duplicate of #{same.memory.pk} ({same.method} {same.similarity:.2f})", scores
            )
    if cross and cross.similarity >= limit(cross, "cross_type"):
        return Judgement(
            Outcome.REJECTED,
            cross,
            f"duplicate of #{cross.memory.pk}, a {cross.memory.kind} "
            f"({cross.method} {cross.similarity:.2f}, cross-type)",
            scores,
        )
    if not same or same.similarity < limit(same, "same_topic"):
        return Judgement(Outcome.PASSED, same, "new: nothing on the same topic", scores)
    if cue:
        return Judgement(
            Outcome.SUPERSEDED, same, f"same topic as #{same.memory.pk} and a state change (“{cue}”)", scores
        )
    return _model_judgement(candidate, same, scores, connection=connection, interactive=interactive, no_model=no_model)


def _neighbour_scores(same: Neighbour | None, cross: Neighbour | None, *, profile: str, method: str) -> dict[str, Any]:
    """What the Decision records of the closest same-kind and other-kind neighbours: similarity, measure, id."""
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
    return scores


def _model_judgement(
    candidate: Candidate,
    same: Neighbour,
    scores: dict[str, Any],
    *,
    connection: Connection | None,
    interactive: bool,
    no_model: str,
) -> Judgement:
    """Same topic as `same` and no state-change wording: the model's answer decides; without a model or a readable
    answer, the candidate is kept as uncertain beside `same`. The answer and any error are added to `scores`."""
    if connection is None:
        return Judgement(
            Outcome.UNCERTAIN,
            same,
            f"same topic as #{same.memory.pk}; {no_model}, so both are kept",
            scores,
        )
    answer, error, call_id = ask_model(connection, candidate, same.memory, interactive=interactive)
    scores["model_answer"] = answer or None
    if error:
        scores["model_error"] = error
    if answer == "update":
        return Judgement(
            Outcome.SUPERSEDED, same, f"same topic as #{same.memory.pk}; the model says UPDATE", scores, call_id
        )
    if answer == "duplicate":
        return Judgement(
            Outcome.REJECTED,
            same,
            f"same as #{same.memory.pk} in other words (the model says DUPLICATE)",
            scores,
            call_id,
        )
    if answer == "contradicts":
        return Judgement(
            Outcome.CONTRADICTION,
            same,
            f"contradicts #{same.memory.pk} (the model says CONTRADICTS): both kept and linked",
            scores,
            call_id,
        )
    if answer == "independent":
        return Judgement(
            Outcome.UNCERTAIN, same, f"same topic as #{same.memory.pk}; the model says INDEPENDENT", scores, call_id
        )
    return Judgement(
        Outcome.UNCERTAIN,
        same,
        f"same topic as #{same.memory.pk}; the model gave no answer ({error}), so both are kept",
        scores,
        call_id,
    )
