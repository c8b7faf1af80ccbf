"""The daily→weekly→monthly→yearly hierarchy of a character's memories (entity-core's consolidator,
docs/GLOSSARY.md).

A daily summary is made from the messages a character's chats received that day (by the time their message
memories were stored), unless that day already has one (made here, or sent through the API or by sync). Weekly,
monthly and yearly summaries are made from the level below (periods.py says which parts make which period). All
in the user's time zone; a period is built once it is due and not built yet, so a worker that was down catches up
on every missed period at its next run. Summaries are additions: the parts are never retired or changed.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import connection as db
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.chats.models import Character
from apps.llm.client import LlmError, complete_prompt
from apps.llm.models import Connection
from apps.llm.prompts import prompt_get
from apps.llm.tokens import count_tokens
from apps.memories.embeddings import EmbeddingUnavailable, config_for, embed_texts
from apps.memories.models import Decision, Kind, LifecycleSettings, Memory, Retired, Status
from apps.memories.services.lifecycle import periods
from apps.memories.services.lifecycle.periods import CHILD, LEVELS, Period
from apps.memories.services.lifecycle.scope import ScopeKey, lifecycle_config, scope_locked
from apps.memories.services.memories import memory_create

PROMPT_OVERHEAD = 400
WORDS = {"daily": 200, "weekly": 300, "monthly": 400, "yearly": 600}


def user_time_zone(user_id: int) -> ZoneInfo:
    name = LifecycleSettings.objects.filter(user_id=user_id).values_list("time_zone", flat=True).first() or "UTC"
    try:
        return ZoneInfo(name)
    except ZoneInfoNotFoundError:
        return ZoneInfo("UTC")


def _summaries(character: Character, granularity: str) -> dict[str, Memory]:
    """The character's active summaries of a level by period key (the newest when several share one)."""
    found: dict[str, Memory] = {}
    qs = Memory.objects.filter(
        user_id=character.user_id, character=character, chat__isnull=True, kind=granularity, status=Status.ACTIVE
    ).defer("embedding")
    for memory in qs.order_by("created_at", "id"):
        key = (memory.data or {}).get("period")
        try:
            found[periods.parse_key(granularity, key).key] = memory
        except (ValueError, TypeError):
            continue  # not a period of this level (written by hand before periods were checked): not part of it
    return found


def _dailies(character: Character) -> list[tuple[date, Memory]]:
    """Every active daily memory of the character with its day: each instance keeps its own for a day
    (`YYYY-MM-DD_instance`), and a week is made from all of them."""
    found = []
    qs = Memory.objects.filter(
        user_id=character.user_id, character=character, chat__isnull=True, kind="daily", status=Status.ACTIVE
    ).defer("embedding")
    for memory in qs.order_by("created_at", "id"):
        try:
            found.append((periods.parse_key("daily", (memory.data or {}).get("period")).start, memory))
        except (ValueError, TypeError):
            continue
    return found


def _via(memory: Memory) -> str:
    return f" via {memory.source_instance}" if memory.source_instance else ""


# When a message happened in the story: its send_date (SillyTavern writes three styles, all read into
# `occurred_at` by apps/memories/services/indexing.py), else when it was indexed (a message with no date).
STORY_TIME = "COALESCE(m.occurred_at, m.created_at)"


def _message_days(character: Character, tz: ZoneInfo, since: datetime) -> list[date]:
    """The story's days, from `since` on, on which the character's chats hold messages."""
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT ({STORY_TIME} AT TIME ZONE %s)::date FROM memories_memory m "
            "JOIN chats_chat_characters cc ON cc.chat_id = m.chat_id "
            f"WHERE m.user_id = %s AND m.kind = %s AND cc.character_id = %s AND {STORY_TIME} >= %s",
            [str(tz), character.user_id, Kind.MESSAGE, character.pk, since],
        )
        return sorted(row[0] for row in cursor.fetchall())


def _latest_story_day(character: Character, tz: ZoneInfo) -> date | None:
    """The story's latest day with a message of the character's chats, when the story keeps a calendar of its own
    (an import, a story set in other years: its latest message is dated days before it was written down); None
    for a story told as it happens, whose days end by the clock."""
    with db.cursor() as cursor:
        cursor.execute(
            f"SELECT max({STORY_TIME} AT TIME ZONE %s)::date, max(m.created_at AT TIME ZONE %s)::date "
            "FROM memories_memory m JOIN chats_chat_characters cc ON cc.chat_id = m.chat_id "
            "WHERE m.user_id = %s AND m.kind = %s AND cc.character_id = %s",
            [str(tz), str(tz), character.user_id, Kind.MESSAGE, character.pk],
        )
        story, written = cursor.fetchone()
    return story if story is not None and story < written - timedelta(days=1) else None


def hierarchy_plan(*, character: Character, now: datetime) -> list[Period]:
    """The periods due and not built yet, in the order they must be built (days first, years last)."""
    tz = user_time_zone(character.user_id)
    hour = lifecycle_config()["hierarchy"]["hour"]
    built = {level: _summaries(character, level) for level in LEVELS}
    story_day = _latest_story_day(character, tz)
    # Never further back than `first_run_days` before the story's latest day (older days are built when a person
    # asks for them): a long import must not be summarised day by day on its own, at the person's expense.
    last = min(story_day or now.astimezone(tz).date(), now.astimezone(tz).date())
    since_day = last - timedelta(days=lifecycle_config()["hierarchy"]["first_run_days"])
    if built["daily"]:
        latest = max(periods.parse_key("daily", key).start for key in built["daily"])
        since_day = max(since_day, latest - timedelta(days=1))
    since = datetime.combine(since_day, time(0), tzinfo=tz)
    plan: list[Period] = []
    days = {periods.day(d) for d in _message_days(character, tz, since)}
    days |= {periods.parse_key("daily", key) for key in built["daily"]}
    for level in LEVELS:
        if level == "daily":
            wanted = days
        else:
            wanted = {periods.containing(level, d.start) for d in days}
        for period in sorted(wanted):
            if period.key not in built[level] and _over(period, tz=tz, hour=hour, now=now, story_day=story_day):
                plan.append(period)
    return plan


def _over(period: Period, *, tz: ZoneInfo, hour: int, now: datetime, story_day: date | None) -> bool:
    """Is the period over? For a story with a calendar of its own, once the story has moved past it; for one told
    as it happens, by the clock (at `hour` the day after it ends)."""
    if story_day is not None:
        return period.end < story_day
    return period.due_at(tz, hour) <= now


def _messages(character: Character, period: Period, tz: ZoneInfo) -> list[str]:
    start = datetime.combine(period.start, time(0), tzinfo=tz)
    end = datetime.combine(period.end + timedelta(days=1), time(0), tzinfo=tz)
    rows = (
        Memory.objects.filter(user_id=character.user_id, kind=Kind.MESSAGE, chat__characters=character)
        .annotate(story_time=Coalesce("occurred_at", "created_at"))
        .filter(story_time__gte=start, story_time__lt=end)
        .order_by("story_time", "chat_id", "message_index")
        .values_list("content", flat=True)
    )
    return list(rows)


def _sources(character: Character, period: Period, tz: ZoneInfo) -> tuple[list[str], list[int]]:
    """(texts, memory ids) a period is made from, oldest first."""
    if period.granularity == "daily":
        return _messages(character, period, tz), []
    child_level = CHILD[period.granularity]
    inside = [(day, m) for day, m in _dailies(character) if period.start <= day <= period.end]
    if child_level == "daily":
        chosen = inside
    else:
        whole = {p.key for p in periods.children(period)}
        chosen, covered = [], set()
        for key, memory in _summaries(character, child_level).items():
            if key in whole:
                part = periods.parse_key(child_level, key)
                chosen.append((part.start, memory))
                covered.update(part.days())
        # The days of a straddling or not yet summarised week (or month) count by their dailies.
        chosen += [(day, m) for day, m in inside if day not in covered]
    chosen.sort(key=lambda pair: (pair[0], pair[1].pk))
    labels = [f"[{m.kind} {m.data.get('period')}{_via(m)}] {m.content}" for _, m in chosen]
    return labels, [m.pk for _, m in chosen]


def _fit(texts: list[str], budget: int) -> tuple[list[str], int]:
    """The newest texts that fit `budget` tokens, oldest first, and how many were left out."""
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        cost = count_tokens(text) + 1
        if used + cost > budget and kept:
            break
        kept.append(text)
        used += cost
    return list(reversed(kept)), len(texts) - len(kept)


def hierarchy_build(
    *, character: Character, period: Period, connection: Connection, replace: bool = False
) -> Memory | None:
    """Summarise one period. None when it has no material. With `replace`, an existing summary of the period is
    superseded by the new one (a manual re-run); otherwise an existing one is kept and returned."""
    tz = user_time_zone(character.user_id)
    existing = _summaries(character, period.granularity).get(period.key)
    if existing is not None and not replace:
        return existing
    texts, source_ids = _sources(character, period, tz)
    if not texts:
        return None
    window = connection.context_window or settings.LOREKEEPER_LLM["context_window"][connection.effective_profile]
    budget = max(500, window - lifecycle_config()["hierarchy"]["response_tokens"] - PROMPT_OVERHEAD)
    kept, left_out = _fit(texts, budget)
    prompt = prompt_get("memories", "hierarchy")
    completion = complete_prompt(
        connection,
        prompt,
        purpose=f"hierarchy.{period.granularity}",
        max_tokens=lifecycle_config()["hierarchy"]["response_tokens"],
        character=character.name,
        granularity=period.granularity,
        period=period.key,
        words=WORDS[period.granularity],
        sources="\n".join(kept),
    )
    if not completion.text:
        raise LlmError(
            f"the model answered nothing for the {period.granularity} summary of {period.key}", call=completion.call
        )
    return _store(character, period, completion, source_ids, len(kept), left_out, existing if replace else None, tz)


@transaction.atomic
def _store(character, period, completion, source_ids, used, left_out, replaced, tz) -> Memory:
    vector, model_key = None, ""
    config = config_for(character.user)
    if config.enabled:
        try:
            vector, model_key = embed_texts(config, [completion.text])[0], config.key
        except EmbeddingUnavailable:
            pass
    memory = memory_create(
        user=character.user,
        kind=period.granularity,
        content=completion.text,
        character=character,
        embedding=vector,
        embedding_model=model_key,
        data={
            "period": period.key,
            "start": period.start.isoformat(),
            "end": period.end.isoformat(),
            "sources": source_ids,
            "source_count": used,
            "left_out": left_out,
            "generated": True,
        },
        occurred_at=datetime.combine(period.start, time(0), tzinfo=tz),
        origin="hierarchy",
    )
    if replaced is not None:
        Memory.objects.filter(pk=replaced.pk).update(
            status=Status.RETIRED, retired_reason=Retired.SUPERSEDED, superseded_by=memory, version=F("version") + 1
        )
    Decision.objects.create(
        user_id=character.user_id,
        memory=memory,
        related=replaced,
        outcome=Decision.Outcome.SUMMARISED,
        kind=period.granularity,
        content=memory.content[:2000],
        method="model",
        scores={"period": period.key, "sources": len(source_ids) or used, "left_out": left_out},
        reason=f"{period.granularity} summary of {period.key} from {used} "
        f"{'messages' if period.granularity == 'daily' else 'summaries'}"
        + (f" ({left_out} older left out to fit the model's context)" if left_out else "")
        + (f", replacing #{replaced.pk}" if replaced else ""),
        llm_call=completion.call,
    )
    return memory


def hierarchy_run(
    *, character: Character, connection: Connection, now: datetime | None = None, force: Period | None = None
) -> dict[str, list[str]]:
    """Build every due period of a character (catch-up included), then `force` (a manual run of one period, even
    one not yet due or already built). A forced period that is due as well is built once, as forced: built as due
    first, it was built again at once, a second call to the model and a summary superseded as soon as written."""
    now = now or timezone.now()
    built: dict[str, list[str]] = {level: [] for level in LEVELS}
    with scope_locked(ScopeKey(character.user_id, character.pk, None)):
        for period in hierarchy_plan(character=character, now=now):
            if period == force:
                continue
            if hierarchy_build(character=character, period=period, connection=connection):
                built[period.granularity].append(period.key)
        if force is not None and hierarchy_build(
            character=character, period=force, connection=connection, replace=True
        ):
            built[force.granularity].append(force.key)
    return built
