"""Confidence decay (as in Smart Memory, docs/GLOSSARY.md): an extraction pass that does not find a memory again counts
against it.

After `grace_passes` (10) unconfirmed passes its confidence falls by `decay` (0.02) per pass down to `floor` (0.3);
a memory at the floor is retired (reason "decayed"), kept with its chain, out of search and injection. Being
extracted again (a rejected duplicate re-confirms it) raises confidence and resets the counter
(apps/memories/services/memories.py memory_reconfirm).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest

from apps.memories.models import Decision, Memory, Retired, Status
from apps.memories.services.lifecycle.scope import ScopeKey, lifecycle_config

FLOOR_EPSILON = 1e-9


@transaction.atomic
def memories_pass_end(*, scope: ScopeKey, kinds: Iterable[str], seen_ids: Iterable[int]) -> dict[str, int]:
    """Record one extraction pass over `kinds` in `scope`: every active memory of those kinds not in `seen_ids`
    (stored or re-confirmed by this pass) is one pass more unconfirmed."""
    config = lifecycle_config()["confidence"]
    grace, decay, floor = config["grace_passes"], config["decay"], config["floor"]
    unseen = Memory.objects.filter(scope.q(), status=Status.ACTIVE, kind__in=list(kinds)).exclude(
        pk__in=list(seen_ids)
    )
    counted = unseen.update(
        unconfirmed_count=F("unconfirmed_count") + 1,
        confidence=Case(
            When(unconfirmed_count__gte=grace, then=Greatest(F("confidence") - decay, Value(floor))),
            default=F("confidence"),
        ),
    )
    # `unconfirmed_count__gte=grace` above reads the value before this pass's increment: the 11th pass decays.
    at_floor = list(
        unseen.filter(unconfirmed_count__gt=grace, confidence__lte=floor + FLOOR_EPSILON).defer("embedding")
    )
    for memory in at_floor:
        Decision.objects.create(
            user_id=memory.user_id,
            memory=memory,
            outcome=Decision.Outcome.DECAYED,
            kind=memory.kind,
            content=memory.content,
            method="decay",
            scores={
                "confidence": memory.confidence,
                "unconfirmed_count": memory.unconfirmed_count,
                "floor": floor,
                "grace_passes": grace,
            },
            reason=f"not extracted again in {memory.unconfirmed_count} passes: confidence decayed to {floor}",
        )
    retired = Memory.objects.filter(pk__in=[m.pk for m in at_floor]).update(
        status=Status.RETIRED, retired_reason=Retired.DECAYED, version=F("version") + 1
    )
    return {"unconfirmed": counted, "retired": retired}
