"""Taking back what extraction wrote from messages that changed: what extraction made from message `from_index`
on is retired (kept, with a decision saying why), and what those memories had replaced comes back. Memories a
person or the API wrote are never touched; neither are re-confirmations (a confidence bump stays)."""

from __future__ import annotations

from django.db.models import F, Q
from django.db.models.expressions import RawSQL

from apps.chats.models import Chat
from apps.memories.models import Decision, Kind, Memory, Retired, Status

# Kinds whose memories carry the messages they came from; summaries, scenes, profiles and canon are rebuilt by
# their own tiers.
SOURCED_KINDS = (
    Kind.FACT,
    Kind.RELATIONSHIP,
    Kind.PREFERENCE,
    Kind.EVENT,
    Kind.SCENE,
    Kind.REVELATION,
    Kind.DEVELOPMENT,
    Kind.DETAIL,
    Kind.ARC,
    Kind.STATE,
    Kind.EPISTEMIC,
)
FIRST_SOURCE = "(SELECT min(i) FROM unnest(memories_memory.source_message_indices) AS i)"


def memories_rollback(*, chat: Chat, from_index: int, kinds=SOURCED_KINDS, reason: str = "") -> dict[str, int]:
    reason = reason or f"messages from #{from_index} changed and are extracted again"
    made = (
        Memory.objects.filter(user_id=chat.user_id, source_chat=chat, origin="extraction", status=Status.ACTIVE)
        .filter(Q(chat=chat) | Q(chat__isnull=True))
        .filter(kind__in=kinds)
        .alias(first_source=RawSQL(FIRST_SOURCE, []))
        .filter(first_source__gte=from_index)
        .defer("embedding")
    )
    targets = list(made)
    ids = [m.pk for m in targets]
    Decision.objects.bulk_create(
        Decision(
            user_id=m.user_id,
            memory=m,
            outcome=Decision.Outcome.ROLLED_BACK,
            kind=m.kind,
            content=m.content,
            method="rebuild",
            reason=reason,
        )
        for m in targets
    )
    Memory.objects.filter(pk__in=ids).update(
        status=Status.RETIRED, retired_reason=Retired.ROLLED_BACK, version=F("version") + 1
    )
    replaced = list(
        Memory.objects.filter(superseded_by__in=ids, status=Status.RETIRED)
        .exclude(pk__in=ids)
        .filter(retired_reason__in=["superseded", "consolidated"])
        .defer("embedding")
    )
    restored = memories_restore(replaced, reason="what replaced it was rolled back")
    return {"rolled_back": len(ids), "restored": restored}


def memories_restore(memories: list[Memory], *, reason: str) -> int:
    Memory.objects.filter(pk__in=[m.pk for m in memories]).update(
        status=Status.ACTIVE, retired_reason="", superseded_by=None, valid_to=None, version=F("version") + 1
    )
    Decision.objects.bulk_create(
        Decision(
            user_id=m.user_id,
            memory=m,
            outcome=Decision.Outcome.RESTORED,
            kind=m.kind,
            content=m.content,
            method="rebuild",
            reason=reason,
        )
        for m in memories
    )
    return len(memories)


def summary_rollback(*, chat: Chat, to_index: int) -> int:
    """The rolling summary as it stood when it ended at or before `to_index`; answers its summaryEnd."""
    current = (
        Memory.objects.filter(chat=chat, kind=Kind.SUMMARY, status=Status.ACTIVE, origin="extraction")
        .defer("embedding")
        .order_by("-id")
        .first()
    )
    if current is None or current.data_field("summary_end", int, 0) <= to_index:
        return current.data_field("summary_end", int, 0) if current else 0
    version = current
    while version is not None and version.data_field("summary_end", int, 0) > to_index:
        version = Memory.objects.filter(superseded_by=version, kind=Kind.SUMMARY).defer("embedding").first()
    Memory.objects.filter(pk=current.pk).update(
        status=Status.RETIRED, retired_reason=Retired.ROLLED_BACK, version=F("version") + 1
    )
    Decision.objects.create(
        user_id=chat.user_id,
        memory=current,
        outcome=Decision.Outcome.ROLLED_BACK,
        kind=Kind.SUMMARY,
        content=current.content[:2000],
        method="rebuild",
        reason=f"the summary past #{to_index} is written again",
    )
    if version is None:
        return 0
    end = version.data_field("summary_end", int, 0)
    memories_restore([version], reason=f"the summary as it stood up to #{end}")
    return end
