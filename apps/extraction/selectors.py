"""Reads of the extraction pipeline, scoped to the requesting user (another user's chat, job or scene is a 404)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractUser
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from apps.chats.models import Chat
from apps.extraction.models import ChatPipeline, ContinuityCheck, ModelTest, PipelineJob, Recap, Scene
from apps.extraction.services.consent import T3, Estimate, awaits_consent, backlog
from apps.extraction.services.consent import estimate as consent_estimate
from apps.extraction.services.jobs import ORDER, PENDING, config
from apps.extraction.services.settings import extraction_settings_get
from apps.llm.models import Connection
from apps.llm.selectors import background_tokens_since, connection_default, daily_limit, day_start
from apps.memories.models import Kind, Memory, Status

TIER_LABELS = dict(PipelineJob.Tier.choices)
RETRYING_SHOWN = 5
PIPELINE_STATES = [
    "running",
    "queued",
    "paused",
    "gathering",
    "idle",
    "off",
    "no_model",
    "awaiting_consent",
    "limit_reached",
]
# In the tiers' order (T1, T2, T3, T4), the continuity check last: it reads one reply, not a range.
COVERAGE_TIERS = ("compaction", "scenes", "session", "longterm", "arcs", "ledger", "profiles")


@dataclass
class PipelineStatus:
    chat: Chat
    pipeline: ChatPipeline
    state: str  # one of PIPELINE_STATES
    message_count: int
    coverage: list[dict]
    pending: int
    failed: list[PipelineJob] = field(default_factory=list)
    # Jobs whose last try failed, waiting to be tried again: each {"job", "in_seconds", "tries"} (how long until the
    # next try, how many it has in all), so that a model failing every try shows before the job gives up.
    retrying: list[dict] = field(default_factory=list)
    jobs: list[PipelineJob] = field(default_factory=list)
    continuity: ContinuityCheck | None = None
    active: bool = False  # a job runs, or one waits that can run (on a paused chat: one asked for by hand)
    estimate: Estimate | None = None  # what extracting the backlog will take: while it waits for the person, and
    # while it runs (then its `seconds` is the time left, at the connection's measured speed)
    tokens_today: int = 0  # background tokens the account spent today
    daily_limit: int | None = None

    @property
    def summary_end(self) -> int:
        return self.pipeline.summary_end


def pipeline_status(*, user: AbstractUser, chat: Chat, jobs: int = 10) -> PipelineStatus:
    """Where the chat stands in each tier, what runs or waits, what failed, the latest jobs and continuity check."""
    if chat.user_id != user.pk:
        raise Http404("No such chat.")
    pipeline = ChatPipeline.objects.filter(chat=chat).first() or ChatPipeline(chat=chat, user=user)
    recent = list(PipelineJob.objects.filter(chat=chat).order_by("-created_at", "-id")[:jobs])
    waiting = list(PipelineJob.objects.filter(chat=chat, state__in=PENDING).values_list("state", "manual"))
    states = {state for state, _ in waiting}
    pending = len(waiting)
    active = any(state == PipelineJob.State.RUNNING or not pipeline.paused or manual for state, manual in waiting)
    latest = (
        PipelineJob.objects.filter(chat=chat)
        .order_by("tier", "-created_at", "-id")
        .distinct("tier")
        .values_list("pk", "state")
    )
    failed_ids = [pk for pk, state in latest if state == PipelineJob.State.FAILED]
    failed = sorted(PipelineJob.objects.filter(pk__in=failed_ids), key=lambda j: ORDER.index(j.tier))
    now, tries = timezone.now(), config()["max_attempts"]
    retrying = [
        {"job": job, "in_seconds": max(0.0, (job.next_attempt_at - now).total_seconds()), "tries": tries}
        for job in PipelineJob.objects.filter(
            chat=chat, state=PipelineJob.State.QUEUED, next_attempt_at__isnull=False, attempts__gt=0
        ).exclude(error="")[:RETRYING_SHOWN]
    ]
    settings = extraction_settings_get(user=user)
    connection = connection_default(user_id=user.pk)
    tokens_today = background_tokens_since(user_id=user.pk, since=day_start())
    limit = daily_limit(user_id=user.pk)
    estimate = None
    if not settings.enabled:
        state = "off"
    elif connection is None:
        state = "no_model"
    elif PipelineJob.State.RUNNING in states:
        state = "running"
    elif limit is not None and tokens_today >= limit:
        state = "limit_reached"
    elif awaits_consent(pipeline, settings, chat.message_count):
        state = "awaiting_consent"
        estimate = consent_estimate(chat=chat, pipeline=pipeline, settings=settings, connection=connection)
    elif pipeline.paused:
        state = "paused"
    elif PipelineJob.State.QUEUED in states:
        state = "queued"
    else:
        state = "idle"
    if state in ("running", "queued") and backlog(pipeline, chat.message_count) > 0:
        estimate = consent_estimate(chat=chat, pipeline=pipeline, settings=settings, connection=connection)
    coverage = [_coverage_row(tier, pipeline, settings, chat.message_count) for tier in COVERAGE_TIERS]
    if state == "idle" and any(row["next_at"] is not None for row in coverage):
        state = "gathering"
    return PipelineStatus(
        chat=chat,
        pipeline=pipeline,
        state=state,
        message_count=chat.message_count,
        coverage=coverage,
        pending=pending,
        failed=failed,
        retrying=sorted(retrying, key=lambda item: ORDER.index(item["job"].tier)),
        jobs=recent,
        continuity=ContinuityCheck.objects.filter(chat=chat).order_by("-created_at", "-id").first(),
        active=active and state not in ("off", "no_model", "awaiting_consent", "limit_reached"),
        estimate=estimate,
        tokens_today=tokens_today,
        daily_limit=limit,
    )


def _coverage_row(tier: str, pipeline: ChatPipeline, settings, count: int) -> dict:
    """How far `tier` has read, and, when it is behind with nothing due, why it waits (`note`) and the message
    count it reads on at (`next_at`, None when it is not behind or does not wait for a count): so "10 of 21"
    beside an idle pipeline says what it is waiting for."""
    through = int(pipeline.through.get(tier, 0))
    row = {"tier": tier, "label": TIER_LABELS.get(tier, tier), "through": through, "next_at": None, "note": ""}
    if tier == "compaction":
        # The rolling summary holds the older messages only: the newest ones are in the prompt as they are.
        row["label"] = "rolling summary"
        row["note"] = (
            f"Summarises older messages once the chat outgrows {settings.compaction_share:.0%} of a "
            f"{settings.context_tokens:,}-token context; the newest stay as written."
        )
        return row
    if through >= count:
        return row
    if tier in T3:
        row["next_at"] = through + settings.batch_every
        row["note"] = f"Reads the next {settings.batch_every} messages together, at {row['next_at']:,} messages."
    elif tier == "scenes":
        row["note"] = "Scene breaks are looked for in what the memory tiers have read."
    elif tier == "profiles":
        row["next_at"] = through + settings.profile_every
        row["note"] = (
            f"Rebuilt every {settings.profile_every} messages (next at {row['next_at']:,}), or "
            f"{settings.profile_stale_minutes} minutes after the last build."
        )
    return row


def job_list(*, user: AbstractUser, chat: Chat | None = None, state: str | None = None) -> QuerySet[PipelineJob]:
    jobs = PipelineJob.objects.filter(user=user).select_related("chat")
    if chat is not None:
        jobs = jobs.filter(chat=chat)
    return jobs.filter(state=state) if state else jobs


def job_get(*, user: AbstractUser, job_id: int) -> PipelineJob:
    job = PipelineJob.objects.filter(user=user, pk=job_id).select_related("chat").first()
    if job is None:
        raise Http404("No such job.")
    return job


def scene_list(*, user: AbstractUser, chat: Chat) -> QuerySet[Scene]:
    return Scene.objects.filter(user=user, chat=chat).order_by("start_index")


def scene_get(*, user: AbstractUser, chat: Chat, scene_id: int) -> Scene:
    scene = Scene.objects.filter(user=user, chat=chat, pk=scene_id).first()
    if scene is None:
        raise Http404("No such scene.")
    return scene


def recap_current(*, user: AbstractUser, chat: Chat) -> Recap | None:
    """The recap to show: the newest one not dismissed."""
    return Recap.objects.filter(user=user, chat=chat).exclude(state=Recap.State.DISMISSED).order_by("-id").first()


def recap_get(*, user: AbstractUser, chat: Chat, recap_id: int) -> Recap:
    recap = Recap.objects.filter(user=user, chat=chat, pk=recap_id).first()
    if recap is None:
        raise Http404("No such recap.")
    return recap


def continuity_list(*, user: AbstractUser, chat: Chat) -> QuerySet[ContinuityCheck]:
    return ContinuityCheck.objects.filter(user=user, chat=chat).order_by("-created_at", "-id")


def model_test_list(*, user: AbstractUser, connection: Connection | None = None) -> QuerySet[ModelTest]:
    tests = ModelTest.objects.filter(user=user)
    return tests.filter(connection=connection) if connection is not None else tests


def model_test_get(*, user: AbstractUser, test_id: int) -> ModelTest:
    test = ModelTest.objects.filter(user=user, pk=test_id).first()
    if test is None:
        raise Http404("No such model test.")
    return test


def story_state(*, user: AbstractUser, chat: Chat) -> dict:
    """What the pipeline holds about the chat's story now: summary, state ledger, arcs, who knows what, profiles,
    canon (active memories only; their histories are on the memory pages)."""
    if chat.user_id != user.pk:
        raise Http404("No such chat.")
    characters = list(chat.characters.all())
    visible = Memory.objects.filter(user=user, status=Status.ACTIVE).filter(
        Q(chat=chat) | Q(chat__isnull=True, character__in=characters)
    )
    visible = visible.defer("embedding").order_by("created_at", "id")
    by_kind: dict[str, list[Memory]] = {}
    for memory in visible.filter(
        kind__in=[Kind.SUMMARY, Kind.STATE, Kind.ARC, Kind.EPISTEMIC, Kind.PROFILE, Kind.CANON]
    ).select_related("character")[:2000]:
        by_kind.setdefault(memory.kind, []).append(memory)
    knowledge: dict[str, list[Memory]] = {}
    for memory in by_kind.get(Kind.EPISTEMIC, []):
        knowledge.setdefault(_data_text(memory, "holder") or "—", []).append(memory)
    summaries = [m for m in by_kind.get(Kind.SUMMARY, []) if m.chat_id == chat.pk]
    arcs = by_kind.get(Kind.ARC, [])
    return {
        "summary": summaries[-1] if summaries else None,
        "ledger": sorted(by_kind.get(Kind.STATE, []), key=lambda m: (_data_text(m, "type"), _data_text(m, "key"))),
        "open_arcs": [m for m in arcs if _data_text(m, "status") != "resolved"],
        "resolved_arcs": [m for m in arcs if _data_text(m, "status") == "resolved"],
        "knowledge": sorted(knowledge.items()),
        "profiles": sorted(by_kind.get(Kind.PROFILE, []), key=lambda m: _data_text(m, "section")),
        "canon": by_kind.get(Kind.CANON, []),
    }


def _data_text(memory: Memory, key: str) -> str:
    """A field of the memory's `data` as text to group and sort by: a client may have written any JSON there (a
    list is no key to group by, and a number does not sort among names)."""
    value = memory.data.get(key) if isinstance(memory.data, dict) else None
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
