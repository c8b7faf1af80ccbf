"""Orchestration of the tiers (docs/GLOSSARY.md): per-chat counters decide which tiers run; edits, swipes and deletions
of messages already extracted are taken back and extracted again (close to the end at once, further back when a person
asks); a person can pause, resume, rebuild from a message, and ask for a tier by hand."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.chats.models import Chat
from apps.common.exceptions import ApplicationError
from apps.extraction.models import ChatPipeline, ContinuityCheck, ExtractionSettings, PipelineJob, Recap
from apps.extraction.services import transcript
from apps.extraction.services.consent import T3, awaits_consent, covered
from apps.extraction.services.jobs import PENDING, job_queue, jobs_cancel_pending, wake
from apps.extraction.services.settings import automatic, extraction_settings_get
from apps.extraction.services.tiers.compaction import due as compaction_due
from apps.extraction.services.tiers.derived import latest_reply
from apps.llm.selectors import connection_default, limit_reached
from apps.memories.models import MemoryScope

Tier = PipelineJob.Tier
# Tiers whose coverage means "memories were made from these messages": an edit below it takes them back.
EXTRACTED = ("compaction", "session", "longterm", "arcs", "ledger", "scenes")
BY_HAND = {
    "canon": Tier.CANON,
    "continuity": Tier.CONTINUITY,
    "profiles": Tier.PROFILES,
    "compaction": Tier.COMPACTION,
}


def _take_changed_from(chat_id: int) -> int | None:
    """The lowest message index whose text changed since the last plan (recorded by the recall index)."""
    scope = MemoryScope.objects.select_for_update().filter(chat_id=chat_id).exclude(changed_from=None).first()
    if scope is None:
        return None
    MemoryScope.objects.filter(pk=scope.pk).update(changed_from=None)
    return scope.changed_from


def pipeline_plan(*, chat_id: int) -> ChatPipeline | None:
    """Queue the tiers that are due for the chat as it is now; answers the pipeline (None if the chat is gone), its
    `blocked` true when nothing can run (extraction off, or no model connection)."""
    chat = Chat.objects.filter(pk=chat_id).first()
    if chat is None:
        return None
    with transaction.atomic():
        pipeline, _ = ChatPipeline.objects.select_for_update().get_or_create(
            chat=chat, defaults={"user_id": chat.user_id}
        )
        settings = extraction_settings_get(user_id=chat.user_id)
        connection = connection_default(user_id=chat.user_id)
        if not settings.enabled or connection is None:
            # Nothing can run. The wake-up stays, for when extraction is switched on or a model added (the sweep
            # looks for it then); what was queued is cancelled, to be planned again at that time.
            ChatPipeline.objects.filter(pk=pipeline.pk).update(needs_plan=True)
            reason = "extraction is switched off" if not settings.enabled else "no model connection"
            jobs_cancel_pending(chat_id=chat_id, reason=reason)
            Recap.objects.filter(chat_id=chat_id, state=Recap.State.PENDING).update(
                state=Recap.State.FAILED, error=f"Not written: {reason}."
            )
            pipeline.blocked = True
            return pipeline
        if limit_reached(user_id=chat.user_id):
            # Paused until midnight: what is queued stays queued, and the sweep comes back for the wake-up.
            ChatPipeline.objects.filter(pk=pipeline.pk).update(needs_plan=True)
            pipeline.blocked = True
            return pipeline
        pipeline.blocked = False
        changed = _take_changed_from(chat_id)
        if changed is not None:
            _on_change(pipeline, chat, changed, settings)
        if awaits_consent(pipeline, settings, chat.message_count):
            # The history waits for Run; only what a person asked for by hand goes on.
            jobs_cancel_pending(chat_id=chat_id, reason="waiting for you to run extraction", keep=Q(manual=True))
        elif not pipeline.paused:
            _queue_due(pipeline, chat, settings, profile=connection.effective_profile)
        pipeline.needs_plan = False
        pipeline.planned_at = timezone.now()
        pipeline.save(update_fields=["needs_plan", "planned_at", "stale_from", "through", "updated_at"])
    return pipeline


def _on_change(pipeline: ChatPipeline, chat: Chat, index: int, settings: ExtractionSettings) -> None:
    """Messages from `index` on changed. A reply checked for continuity is checked again; if memories were already
    extracted from them, they are taken back and extracted again — at once when the change is close to the newest
    extracted message (a swipe, an edit of the last turns), otherwise when a person asks (`stale_from`)."""
    if int(pipeline.through.get("continuity", 0)) > index:
        ContinuityCheck.objects.filter(chat=chat, message_index__gte=index).delete()
        pipeline.through = {**pipeline.through, "continuity": index}
    covered = max((int(pipeline.through.get(tier, 0)) for tier in EXTRACTED), default=0)
    if index >= covered or _read_as_it_is(pipeline, chat, index):
        return
    if covered - index > settings.auto_rebuild_max:
        pipeline.stale_from = index if pipeline.stale_from is None else min(pipeline.stale_from, index)
        return
    _queue_rebuild(chat, index, manual=False)


def _read_as_it_is(pipeline: ChatPipeline, chat: Chat, index: int) -> bool:
    """Whether what was extracted from message `index` was read from the chat as it is now. The recall index notes a
    change seconds after it is made, and a tier that ran meanwhile (the job the change discarded, queued again) read
    the changed text: taking it back would extract the same messages once more. Read by the fingerprints of what the
    done jobs read, since the last rebuild that took back this message's batch: every one that read the message must
    have read it as it is, and each tier that covers it must have such a job whose range (what it made memories
    from) holds it. A job that only read it as context before its own batch does not vouch for the batch that
    holds it; a tier with no such job (its job forgotten since) is not taken on trust."""
    rebuilt = (
        PipelineJob.objects.filter(
            chat=chat, tier=Tier.REBUILD, state=PipelineJob.State.DONE, result__batch_start__lte=index
        )
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    jobs = PipelineJob.objects.filter(
        chat=chat, tier__in=EXTRACTED, state=PipelineJob.State.DONE, read_from__lte=index, read_to__gt=index
    )
    if rebuilt is not None:
        jobs = jobs.filter(finished_at__gt=rebuilt)
    current: dict[tuple[int, int], str] = {}
    read = set()
    for tier, start, end, fingerprint, made in jobs.values_list(
        "tier", "read_from", "read_to", "fingerprint", "result__range"
    ):
        if (start, end) not in current:
            current[start, end] = transcript.fingerprint(chat_id=chat.pk, start=start, end=end)[:50]
        if fingerprint != current[start, end]:
            return False
        if isinstance(made, list) and len(made) == 2 and made[0] <= index <= made[1]:
            read.add(tier)
    return all(tier in read for tier in EXTRACTED if int(pipeline.through.get(tier, 0)) > index)


def _queue_rebuild(chat: Chat, index: int, *, manual: bool) -> PipelineJob:
    # Extracting again what was extracted once is not new spending: it never waits for Run (consent.py).
    pipeline = ChatPipeline.objects.filter(chat=chat).first()
    if pipeline is not None:
        done = covered(pipeline)
        if done > (pipeline.approved_through or 0):
            ChatPipeline.objects.filter(pk=pipeline.pk).update(approved_through=done)
    pending = PipelineJob.objects.filter(chat=chat, tier=Tier.REBUILD, state=PipelineJob.State.QUEUED).first()
    if pending is not None:
        start = min(int(pending.params.get("from_index", index)), index)
        PipelineJob.objects.filter(pk=pending.pk).update(params={"from_index": start}, manual=pending.manual or manual)
        wake(chat_id=chat.pk)
        return pending
    return job_queue(chat=chat, tier=Tier.REBUILD, params={"from_index": index}, manual=manual)


def _stopped_tiers(chat: Chat) -> set[str]:
    """Tiers whose latest job failed after its retries: not queued again until a person retries it."""
    latest = (
        PipelineJob.objects.filter(chat=chat)
        .order_by("tier", "-created_at", "-id")
        .distinct("tier")
        .values_list("tier", "state")
    )
    return {tier for tier, state in latest if state == PipelineJob.State.FAILED}


def _queue_due(pipeline: ChatPipeline, chat: Chat, settings: ExtractionSettings, *, profile: str) -> None:
    pending = set(PipelineJob.objects.filter(chat=chat, state__in=PENDING).values_list("tier", flat=True))
    blocked = pending | _stopped_tiers(chat)
    through = {key: int(value) for key, value in pipeline.through.items()}
    count = chat.message_count
    group = chat.characters.count() > 1
    end = transcript.batch_end(chat_id=chat.pk, count=count, group=group)

    def queue(tier: str, **params) -> None:
        if tier not in blocked:
            job_queue(chat=chat, tier=tier, params=params)
            blocked.add(tier)

    if compaction_due(
        chat_id=chat.pk,
        summary_end=through.get("compaction", 0),
        count=count,
        context_tokens=settings.context_tokens,
        share=settings.compaction_share,
    ):
        queue(Tier.COMPACTION)
    for tier in T3:
        if end - through.get(tier, 0) >= settings.batch_every:
            queue(tier)
    if through.get("scenes", 0) < min(through.get(tier, 0) for tier in T3):
        queue(Tier.SCENES)
    since = count - through.get("profiles", 0)
    built = pipeline.profiles_built_at
    stale = built is not None and timezone.now() - built > timedelta(minutes=settings.profile_stale_minutes)
    if since >= settings.profile_every or (since > 0 and stale):
        queue(Tier.PROFILES)
    if pipeline.canon_due and automatic(settings.canon_auto, profile=profile):
        queue(Tier.CANON)
    if automatic(settings.continuity_auto, profile=profile):
        reply = latest_reply(chat.pk, count)
        if reply is not None and reply >= through.get("continuity", 0):
            queue(Tier.CONTINUITY, index=reply)


# --- what a person does -------------------------------------------------------------------------------------------


@transaction.atomic
def pipeline_pause(*, chat: Chat) -> ChatPipeline:
    """Automatic work stops after the job now running; what a person asks for still runs."""
    pipeline = _locked(chat)
    pipeline.paused = True
    pipeline.save(update_fields=["paused", "updated_at"])
    return pipeline


@transaction.atomic
def pipeline_resume(*, chat: Chat) -> ChatPipeline:
    pipeline = _locked(chat)
    pipeline.paused, pipeline.needs_plan = False, True
    pipeline.save(update_fields=["paused", "needs_plan", "updated_at"])
    wake(chat_id=chat.pk)
    return pipeline


@transaction.atomic
def pipeline_rebuild(*, chat: Chat, from_index: int) -> PipelineJob:
    """Take back what extraction made from message `from_index` on and extract it again."""
    if not 0 <= from_index <= chat.message_count:
        raise ApplicationError(
            f"from_index is between 0 and {chat.message_count} (the chat's length).", {"field": "from_index"}
        )
    _locked(chat)
    return _queue_rebuild(chat, from_index, manual=True)


@transaction.atomic
def pipeline_request(*, chat: Chat, tier: str, index: int | None = None) -> PipelineJob:
    """Run a tier now, by hand (canon and continuity are by hand only on local models, profile A)."""
    if tier not in BY_HAND:
        raise ApplicationError(f"tier is one of {', '.join(BY_HAND)}.", {"field": "tier"})
    if connection_default(user_id=chat.user_id) is None:
        raise ApplicationError("Add a model connection first (Models page).", {"field": "tier"})
    _locked(chat)
    params = {}
    if tier == "continuity":
        index = latest_reply(chat.pk, chat.message_count) if index is None else index
        if index is None or not 0 <= index < chat.message_count:
            raise ApplicationError("There is no reply to check.", {"field": "index"})
        params["index"] = index
    pending = PipelineJob.objects.filter(chat=chat, tier=BY_HAND[tier], state=PipelineJob.State.QUEUED).first()
    if pending is not None and pending.params == params:
        PipelineJob.objects.filter(pk=pending.pk).update(manual=True, next_attempt_at=None)
        wake(chat_id=chat.pk)
        return pending
    return job_queue(chat=chat, tier=BY_HAND[tier], params=params, manual=True)


def _locked(chat: Chat) -> ChatPipeline:
    ChatPipeline.objects.get_or_create(chat=chat, defaults={"user_id": chat.user_id})
    return ChatPipeline.objects.select_for_update().get(chat=chat)


# --- away recap ---------------------------------------------------------------------------------------------------


@transaction.atomic
def chat_opened(*, user: AbstractUser, chat: Chat) -> tuple[Recap | None, bool]:
    """A person opened the chat (its page, or a client said it is back). After `recap_after_hours` away, a
    “Previously on…” is queued. Answers the recap to show (pending, ready or failed), if any, and whether this
    return started it."""
    pipeline = _locked(chat)
    now = timezone.now()
    last = max(filter(None, [pipeline.last_active_at, chat.updated_at]))
    settings = extraction_settings_get(user=user)
    away = now - last
    recap = Recap.objects.filter(chat=chat).exclude(state=Recap.State.DISMISSED).order_by("-id").first()
    started = False
    if (
        away >= timedelta(hours=settings.recap_after_hours)
        and settings.enabled
        and chat.message_count
        and connection_default(user_id=user.pk) is not None
        and (recap is None or recap.created_at < last)
        # Opening a page is not asking: a history waiting for Run, or a spent daily limit, writes no recap.
        and not awaits_consent(pipeline, settings, chat.message_count)
        and not limit_reached(user_id=user.pk)
    ):
        recap = Recap.objects.create(user=user, chat=chat, away_since=last)
        job_queue(chat=chat, tier=Tier.RECAP, params={"recap": recap.pk}, manual=True)
        started = True
    pipeline.last_active_at = now
    pipeline.save(update_fields=["last_active_at", "updated_at"])
    return recap, started


@transaction.atomic
def recap_dismiss(*, recap: Recap) -> Recap:
    Recap.objects.filter(pk=recap.pk).update(state=Recap.State.DISMISSED, dismissed_at=timezone.now())
    recap.refresh_from_db()
    return recap
