"""The tiers of the pipeline, by job tier: each reads what it needs, asks the model, and answers a Work whose
`write` stores the result (or None when there is nothing to do)."""

from __future__ import annotations

from collections.abc import Callable

from apps.extraction.models import PipelineJob
from apps.extraction.services.tiers.arcs import produce_arcs
from apps.extraction.services.tiers.base import JobContext, Work
from apps.extraction.services.tiers.compaction import produce_compaction
from apps.extraction.services.tiers.derived import produce_canon, produce_continuity, produce_profiles
from apps.extraction.services.tiers.ledger import produce_ledger
from apps.extraction.services.tiers.memories import produce_longterm, produce_session
from apps.extraction.services.tiers.rebuild import produce_rebuild
from apps.extraction.services.tiers.recap import produce_recap
from apps.extraction.services.tiers.scenes import produce_epistemic, produce_scenes
from apps.llm.client import UnreadableAnswer

Tier = PipelineJob.Tier
PRODUCERS: dict[str, Callable[[JobContext], Work | None]] = {
    Tier.REBUILD: produce_rebuild,
    Tier.RECAP: produce_recap,
    Tier.CONTINUITY: produce_continuity,
    Tier.COMPACTION: produce_compaction,
    Tier.SESSION: produce_session,
    Tier.LONGTERM: produce_longterm,
    Tier.ARCS: produce_arcs,
    Tier.LEDGER: produce_ledger,
    Tier.SCENES: produce_scenes,
    Tier.EPISTEMIC: produce_epistemic,
    Tier.PROFILES: produce_profiles,
    Tier.CANON: produce_canon,
}

__all__ = ["PRODUCERS", "JobContext", "UnreadableAnswer", "Work"]
