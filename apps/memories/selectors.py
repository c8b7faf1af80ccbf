"""Reads of the memory store, always scoped to the requesting user (another user's memory is a 404)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from itertools import accumulate

from django.contrib.auth.models import AbstractUser
from django.db import connection
from django.db.models import BooleanField, Count, Min, Prefetch, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Greatest, Lower, Trim, TruncDate
from django.db.models.query import prefetch_related_objects
from django.http import Http404
from django.utils import timezone

from apps.chats import selectors as chat_selectors
from apps.chats.models import Character
from apps.common.holds import holds
from apps.memories.embeddings import config_for
from apps.memories.models import Decision, Entity, LifecycleJob, Memory, Status


def memory_list(
    *,
    user: AbstractUser,
    character_id: int | None = None,
    chat_id: int | None = None,
    kinds: list[str] | None = None,
    status: str | None = None,
    entity_id: int | None = None,
    include_messages: bool = True,
) -> QuerySet[Memory]:
    """The user's memories; with `character_id`, that character's own and those of its chats; with `chat_id`,
    that chat's own plus its characters' persistent ones (what search and injection see for the chat)."""
    qs = Memory.objects.filter(user=user)
    if chat_id is not None:
        chat = chat_selectors.chat_get(user=user, chat_id=chat_id)
        qs = qs.filter(Q(chat=chat) | Q(chat__isnull=True, character__in=chat.characters.all()))
    if character_id is not None:
        character = chat_selectors.character_get(user=user, character_id=character_id)
        qs = qs.filter(Q(character=character) | Q(chat__characters=character)).distinct()
    if kinds:
        qs = qs.filter(kind__in=kinds)
    elif not include_messages:
        qs = qs.exclude(kind="message")
    if status:
        qs = qs.filter(status=status)
    if entity_id is not None:
        qs = qs.filter(entities__id=entity_id)
    return qs.select_related("character", "chat").defer("embedding")


def _entity_refs() -> Prefetch:
    return Prefetch("entities", queryset=Entity.objects.only("id", "name", "type"))


def with_links(qs: QuerySet[Memory]) -> QuerySet[Memory]:
    """What the API's memory shows besides its own fields: what it supersedes, contradicts, and its entities."""
    return qs.prefetch_related(
        Prefetch("supersedes", queryset=Memory.objects.only("id", "superseded_by")),
        Prefetch("contradicts", queryset=Memory.objects.only("id")),
        _entity_refs(),
    )


def with_display(qs: QuerySet[Memory]) -> QuerySet[Memory]:
    """What an entry of the memory browser shows besides its own fields: its source chat and its entities."""
    return qs.select_related("source_chat").prefetch_related(_entity_refs())


def memories_display_load(*, memories: list[Memory]) -> None:
    """Loads, onto memories already read (search hits), what a browser entry shows: chats, character, entities."""
    prefetch_related_objects(memories, "source_chat", "character", "chat")
    prefetch_related_objects(memories, _entity_refs())


def memory_linked_get(*, user: AbstractUser, memory_id: int) -> Memory:
    """One memory as the API shows it (with_links)."""
    try:
        return with_links(Memory.objects.filter(user=user, pk=memory_id)).get()
    except Memory.DoesNotExist as exc:
        raise Http404("No such memory.") from exc


def memories_linked(*, user: AbstractUser, memory_ids: list[int]) -> dict[int, Memory]:
    """Memories as the API shows them (with_links), by id."""
    return with_links(Memory.objects.filter(user=user, pk__in=memory_ids)).in_bulk()


def memory_detail_get(*, user: AbstractUser, memory_id: int) -> Memory:
    """A memory as the browser's card shows it: its source chat, entities and the memories it contradicts."""
    memory = memory_get(user=user, memory_id=memory_id)
    prefetch_related_objects(
        [memory],
        "source_chat",
        _entity_refs(),
        Prefetch("contradicts", queryset=Memory.objects.filter(user=user).only("id", "kind", "content")),
    )
    return memory


def memory_embedding_counts(*, user: AbstractUser) -> dict[str, int]:
    """How many of the user's memories have a vector of the current model (the rest wait for the background)."""
    config = config_for(user)
    total = Memory.objects.filter(user=user).count()
    if not config.enabled:
        return {"total": total, "embedded": 0}
    embedded = Memory.objects.filter(user=user, embedding_model=config.key, embedding__isnull=False).count()
    return {"total": total, "embedded": embedded}


def summary_periods_latest(*, user: AbstractUser, characters: list[Character], levels: list[str]) -> dict:
    """The period of the latest active summary of each level built for each character, by (character id, level)."""
    latest = (
        Memory.objects.filter(user=user, character__in=characters, chat__isnull=True, kind__in=levels)
        .filter(status=Status.ACTIVE)
        .order_by("character_id", "kind", "-created_at")
        .distinct("character_id", "kind")
        .values_list("character_id", "kind", "data")
    )
    return {(character_id, kind): (data or {}).get("period", "") for character_id, kind, data in latest}


def memory_get(*, user: AbstractUser, memory_id: int) -> Memory:
    try:
        return Memory.objects.select_related("character", "chat", "superseded_by").get(user=user, pk=memory_id)
    except Memory.DoesNotExist as exc:
        raise Http404("No such memory.") from exc


def memory_history(*, memory: Memory) -> list[Memory]:
    """The supersession chain through this memory, oldest first: what it replaced (following `supersedes`, the
    earliest first when several were folded into one) and what replaced it (following `superseded_by`)."""
    earlier: list[Memory] = []
    frontier = [memory]
    seen = {memory.pk}
    while frontier:
        older = list(
            Memory.objects.filter(superseded_by__in=frontier).exclude(pk__in=seen).defer("embedding").order_by("id")
        )
        seen.update(m.pk for m in older)
        earlier = older + earlier
        frontier = older
    later: list[Memory] = []
    current = memory
    while current.superseded_by_id and current.superseded_by_id not in seen:
        current = Memory.objects.defer("embedding").get(pk=current.superseded_by_id)
        seen.add(current.pk)
        later.append(current)
    return [*earlier, memory, *later]


def entity_list(
    *, user: AbstractUser, character_id: int | None = None, chat_id: int | None = None, search: str = ""
) -> QuerySet[Entity]:
    """The user-wide registry and every character's; with `character_id` that character's and the user-wide; with
    `chat_id` the chat's characters' and the user-wide."""
    qs = Entity.objects.filter(user=user)
    if character_id is not None:
        character = chat_selectors.character_get(user=user, character_id=character_id)
        qs = qs.filter(Q(character=character) | Q(character__isnull=True))
    if chat_id is not None:
        chat = chat_selectors.chat_get(user=user, chat_id=chat_id)
        qs = qs.filter(Q(character__in=chat.characters.all()) | Q(character__isnull=True))
    search = search.replace("\x00", "").strip()
    if search:
        qs = qs.filter(holds("name", search) | Q(aliases__contains=[search]))
    return qs.annotate(memory_count=Count("memories", filter=Q(memories__status="active")))


def entity_get(*, user: AbstractUser, entity_id: int) -> Entity:
    try:
        return Entity.objects.select_related("character").get(user=user, pk=entity_id)
    except Entity.DoesNotExist as exc:
        raise Http404("No such entity.") from exc


# Whether one of the row's aliases is the name given, as the registry's unique name compares names (trimmed, any case).
ALIAS_MATCH = (
    'EXISTS (SELECT 1 FROM unnest("memories_entity"."aliases") AS alias WHERE lower(btrim(alias)) = lower(%s))'
)


def entity_by_name(
    *, user: AbstractUser, character_id: int | None, name: str, exclude_id: int | None = None
) -> Entity | None:
    """The entity of one registry (a character's, or the user-wide one for None) that `name` means: the one of that
    name (trimmed, any case, as the database's unique name compares), or else the oldest that has it as an alias."""
    name = name.strip()
    registry = Entity.objects.filter(user=user, character_id=character_id)
    if exclude_id is not None:
        registry = registry.exclude(pk=exclude_id)
    named = registry.alias(key=Lower(Trim("name"))).filter(key=Lower(Value(name))).first()
    if named is not None:
        return named
    return registry.filter(RawSQL(ALIAS_MATCH, [name], output_field=BooleanField())).order_by("id").first()


def entity_registry(*, user: AbstractUser, entity: Entity) -> QuerySet[Entity]:
    """The other entities of `entity`'s registry, by name, with their active memories counted: what it may merge
    into."""
    return (
        Entity.objects.filter(user=user, character_id=entity.character_id)
        .exclude(pk=entity.pk)
        .annotate(memory_count=Count("memories", filter=Q(memories__status="active")))
        .order_by("name", "id")
    )


def entity_find(*, user: AbstractUser, entity_id: int) -> Entity | None:
    """entity_get for an entity a request names in its body: None where entity_get answers 404."""
    return Entity.objects.select_related("character").filter(user=user, pk=entity_id).first()


def entities_get(*, user: AbstractUser, entity_ids: list[int]) -> list[Entity]:
    """These entities of the user, by name, their active memories counted; 404 when one is not theirs."""
    entities = list(
        entity_list(user=user).filter(pk__in=entity_ids).select_related("character").order_by("name", "id")
    )
    if len(entities) != len(set(entity_ids)):
        raise Http404("No such entity.")
    return entities


def entity_list_by_name(*, user: AbstractUser, character_id: int | None = None, search: str = "") -> QuerySet[Entity]:
    """entity_list by name, each with its character: the entities page."""
    return (
        entity_list(user=user, character_id=character_id, search=search)
        .select_related("character")
        .order_by("name", "id")
    )


def entity_memories(*, entity: Entity, limit: int = 100) -> QuerySet[Memory]:
    """The entity's active memories, newest first, as the API shows them (with_links)."""
    return with_links(entity.memories.filter(status=Status.ACTIVE).defer("embedding").order_by("-id")[:limit])


def decision_list(*, user: AbstractUser, memory_id: int) -> QuerySet[Decision]:
    """Why this memory is here and what happened to it: decisions that made or changed it, and those that
    compared another candidate with it (re-confirmations, supersessions, merges), newest first."""
    memory = memory_get(user=user, memory_id=memory_id)
    return (
        Decision.objects.filter(user=user)
        .filter(Q(memory=memory) | Q(related=memory))
        .select_related("memory", "related", "llm_call")
        .defer("memory__embedding", "related__embedding")
    )


def decision_list_recent(*, user: AbstractUser) -> QuerySet[Decision]:
    """The user's decisions that did something (all but the candidates passed as new), newest first."""
    return (
        Decision.objects.filter(user=user)
        .filter(~Q(outcome=Decision.Outcome.PASSED))
        .select_related("memory", "related")
        .defer("memory__embedding", "related__embedding")
    )


def lifecycle_job_list(*, user: AbstractUser, character_id: int | None = None) -> QuerySet[LifecycleJob]:
    jobs = LifecycleJob.objects.filter(user=user).select_related("character", "chat")
    return jobs.filter(character_id=character_id) if character_id is not None else jobs


def lifecycle_job_get(*, user: AbstractUser, job_id: int) -> LifecycleJob:
    job = LifecycleJob.objects.filter(user=user, pk=job_id).select_related("character", "chat").first()
    if job is None:
        raise Http404("No such job.")
    return job


# Memories of a character that a chat taught or holds: deleting the character keeps them (moved to their chat)
# unless the person asks that they go too (apps.memories.services.characters).
FROM_CHATS = Q(chat__isnull=False) | Q(source_chat__isnull=False)


def memory_counts_by_kind(*, queryset: QuerySet[Memory]) -> dict[str, int]:
    """Memories of a memory_list queryset, counted by kind."""
    rows = queryset.order_by().values("kind").annotate(n=Count("id", distinct=True))
    return {row["kind"]: row["n"] for row in rows}


def character_memory_counts(*, character: Character) -> dict[str, int]:
    """What deleting the character does to its memories: `own` go with it; `from_chats` are kept unless the
    person asks that they go too. Retired memories count: they are deleted as well."""
    return Memory.objects.filter(character=character).aggregate(
        own=Count("id", filter=~FROM_CHATS), from_chats=Count("id", filter=FROM_CHATS)
    )


# --- growth over time (the memory browser's chart) ----------------------------------------------------------------
# How many memories were active on each day, for the memory browser's growth chart (apps/memories/views/charts.py):
# the browser list's scope (`memory_list`), chat messages left out as the list leaves them out by default. A memory
# counts from the day it was made; a retired one stops counting on the day it was retired, its last change
# (`changed_at`, kept by the database for every write; a retired memory is not written again), never before it was
# made.

WEEK = 7


@dataclass(frozen=True)
class Growth:
    days: list[date]
    active: list[int]  # active at the end of each day
    before: int  # active before the first day
    ever: int  # memories made in the scope, retired ones included: none means nothing to draw

    @property
    def now(self) -> int:
        return self.active[-1]

    def change(self, days: int = WEEK) -> int:
        """The change over the last `days` days."""
        return self.now - (self.active[-days - 1] if len(self.active) > days else self.before)


def memory_growth(
    *,
    user: AbstractUser,
    character_id: int | None = None,
    chat_id: int | None = None,
    days: int | None = 30,
    today: date | None = None,
) -> Growth:
    """Active memories at the end of each of the last `days` days, today included (None: since the first memory)."""
    today = today or timezone.localdate()
    memories = memory_list(user=user, character_id=character_id, chat_id=chat_id, include_messages=False)
    memories = memories.order_by().annotate(
        made=TruncDate("created_at"),
        gone=TruncDate(Greatest(Coalesce("changed_at", "updated_at"), "created_at")),
    )
    totals = memories.aggregate(ever=Count("id", distinct=True), first=Min("made"))
    if days is None:
        start = min(totals["first"] or today, today)
    else:
        start = today - timedelta(days=days - 1)
    retired = memories.filter(status=Status.RETIRED)
    before = memories.filter(made__lt=start).count() - retired.filter(gone__lt=start).count()
    made = _per_day(memories.filter(made__gte=start, made__lte=today), "made")
    gone = _per_day(retired.filter(gone__gte=start, gone__lte=today), "gone")
    span = [start + timedelta(days=i) for i in range((today - start).days + 1)]
    active = list(accumulate((made.get(day, 0) - gone.get(day, 0) for day in span), initial=before))[1:]
    return Growth(days=span, active=active, before=before, ever=totals["ever"])


def _per_day(memories, field: str) -> dict[date, int]:
    rows = memories.values(field).annotate(n=Count("id", distinct=True)).order_by()
    return {row[field]: row["n"] for row in rows}


@dataclass(frozen=True)
class GraphMemory:
    """A memory as a recall's subgraph draws it: its label (the content's first 80 characters), the entities it
    names (id, name, type; by name) and the memories it contradicts (newest first)."""

    id: int
    kind: str
    label: str
    superseded_by_id: int | None
    entities: list[tuple[int, str, str]]
    contradicts: list[int]


_GRAPH_SQL = """
SELECT m.id, m.kind, left(m.content, 80), m.superseded_by_id,
    COALESCE((SELECT json_agg(json_build_array(e.id, e.name, e.type) ORDER BY e.name, e.id)
              FROM memories_memory_entities me JOIN memories_entity e ON e.id = me.entity_id
              WHERE me.memory_id = m.id), '[]'::json),
    COALESCE((SELECT array_agg(o.id ORDER BY o.created_at DESC, o.id DESC)
              FROM memories_memory_contradicts mc JOIN memories_memory o ON o.id = mc.to_memory_id
              WHERE mc.from_memory_id = m.id), '{}'::bigint[])
FROM memories_memory m WHERE m.user_id = %s AND m.id = ANY(%s::bigint[])
ORDER BY m.created_at DESC, m.id DESC
"""


def memory_graph(*, user_id: int, memory_ids: list[int]) -> list[GraphMemory]:
    """The user's memories `memory_ids` (newest first), with the entities they name and the memories they
    contradict: one round trip, where a queryset with its two prefetches makes three (a reply's recall writes its
    subgraph with each turn)."""
    if not memory_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_GRAPH_SQL, [int(user_id), [int(pk) for pk in memory_ids]])
        rows = cursor.fetchall()
    return [
        GraphMemory(pk, kind, label, superseded_by, [tuple(entity) for entity in entities], contradicts)
        for pk, kind, label, superseded_by, entities, contradicts in rows
    ]  # psycopg reads the json and the array as lists
