"""The message recall layer, and the vectors of every memory.

Every non-empty chat message (its selected swipe, which SillyTavern keeps in `mes`) has one memory of kind
`message` whose content is "Name: text". `chat_index_messages` brings those in step with the chat: it runs after
every write (scheduled by `chat_index_schedule` from chat_touch and import) and is a reconciliation, not a replay,
so a lost or doubled task does no harm and the periodic sweep repairs anything missed. A message that only moved
(an earlier one was deleted or inserted) keeps its memory and vector: memories are matched by content hash first.

`memories_embed_pending` gives vectors to a user's memories that have none under the user's current model: new
ones, edited ones, and all of them after a model change. It commits in batches, so progress is visible while it
runs.

Index runs of one chat take turns: a reconciliation holds an advisory lock on the chat (the next one then finds the
chat indexed at its integrity and returns), and embedding runs claim the rows they embed (memories_embed_pending),
each a batch a task (apps/memories/tasks.py `embed_pending`, which queues the next). So two tasks (two writes to one
chat, an import and the sweep) never send the same texts to the provider, and no task waits a fixed time before it
starts.

A chat deleted while it is indexed ends the run quietly: the reconciliation's rows then fail their foreign key at
commit, and `chat_index_refresh` answers None for a chat that is gone (chat_delete locks the chat first, so the two
never interleave the other way round and fail the deletion).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from django.db import IntegrityError, connection, transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce, Least

from apps.chats.models import Chat, Message
from apps.chats.send_dates import parse_send_date
from apps.common.services import models_copy
from apps.common.tasks import on_commit_once
from apps.memories.embeddings import EmbeddingConfig, config_for, embed_texts, text_hash, vector_writer, vectors_array
from apps.memories.models import Kind, Memory, MemoryScope
from apps.memories.services import queue
from apps.memories.services.schema import chat_schema_ensure

log = logging.getLogger(__name__)

# Rows a run claims at a time (memories_embed_pending), and texts the local model is given at once: it sorts them by
# length and pads each group of 32 to its longest, so more at once pads less (LoCoMo's turns in bfloat16: 235 texts/s
# a core in calls of 128, 276 in calls of 256). More would leave one process the last long batch while the other idles.
EMBED_BATCH = 256
# SQL twin of message_content(): the hash of exactly that text, computed without fetching the texts.
CONTENT_SQL = "CASE WHEN m.name <> '' THEN m.name || ': ' || m.mes ELSE m.mes END"
HASH_SQL = f"encode(sha256(convert_to({CONTENT_SQL}, 'UTF8')), 'hex')"
LOCK_NAMESPACE = 0x4C4B  # "LK": pg_advisory_xact_lock(namespace, chat id)


def message_content(*, name: str, mes: str) -> str:
    return f"{name}: {mes}" if name else mes


def _lock_key(pk: int) -> int:
    return pk % 2**31


def chat_index_schedule(*, chat_id: int) -> None:
    """Bring the chat's message memories in step once the current transaction commits (on every chat write:
    apps/memories/receivers.py)."""
    on_commit_once(queue.enqueue_index_chat, chat_id)


@transaction.atomic
def chat_index_messages(*, chat_id: int) -> dict[str, int]:
    """Reconcile the chat's message memories with its messages. Answers counts of what it did."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, _lock_key(chat_id)])
    chat = Chat.objects.filter(pk=chat_id).first()
    if chat is None or MemoryScope.objects.filter(chat_id=chat_id, indexed_integrity=chat.integrity).exists():
        return {
            "created": 0,
            "moved": 0,
            "deleted": 0,
            "changed_from": None,
        }  # gone, or already indexed as it is (a doubled task)
    wanted = _message_hashes(chat_id)
    existing = Memory.objects.filter(chat_id=chat_id, kind=Kind.MESSAGE).values_list(
        "id", "message_index", "content_hash"
    )
    stale, moves, create = _reconciliation(wanted, existing)
    changed_from = _first_changed(existing, stale=stale, moves=moves, create=create)
    if changed_from is not None:
        # Taken by the extraction planner: what was extracted from these messages may no longer hold.
        MemoryScope.objects.filter(chat_id=chat_id).update(
            changed_from=Least(Coalesce("changed_from", Value(changed_from)), Value(changed_from))
        )
    if stale:
        Memory.objects.filter(pk__in=stale).delete()
    if moves:
        # The unique (chat, message_index) is deferred, so indices may pass through each other here.
        Memory.objects.bulk_update(
            [Memory(pk=pk, message_index=index, source_message_indices=[index]) for pk, index in moves],
            ["message_index", "source_message_indices"],
            batch_size=1000,
        )
    _create_message_memories(chat, create)
    # A chat's first reconciliation makes its scope (at schema version 0: chat_schema_ensure's steps follow).
    MemoryScope.objects.update_or_create(chat_id=chat_id, defaults={"indexed_integrity": chat.integrity})
    return {"created": len(create), "moved": len(moves), "deleted": len(stale), "changed_from": changed_from}


def _message_hashes(chat_id: int) -> list[tuple[int, str]]:
    """(index, content hash) of the chat's non-empty messages, in order, hashed in the database."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.index, {HASH_SQL} FROM chats_message m WHERE m.chat_id = %s AND m.mes <> '' ORDER BY m.index",
            [chat_id],
        )
        return cursor.fetchall()


def _reconciliation(wanted: list[tuple[int, str]], existing) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """(stale, moves, create): a memory already at its message's index with its text stays; a message without one
    takes a left-over memory of the same text (moved: its vector kept) or gets a new one; memories left over after
    that are stale."""
    at_index = {index: (pk, h) for pk, index, h in existing}
    by_hash: dict[str, list[int]] = defaultdict(list)
    keep: set[int] = set()
    for index, content_hash in wanted:
        pk, h = at_index.get(index, (None, None))
        if h == content_hash:
            keep.add(pk)
    for pk, _index, h in existing:
        if pk not in keep:
            by_hash[h].append(pk)
    moves: list[tuple[int, int]] = []
    create: list[int] = []
    for index, content_hash in wanted:
        pk, h = at_index.get(index, (None, None))
        if h == content_hash:
            continue
        if by_hash.get(content_hash):
            moves.append((by_hash[content_hash].pop(), index))
        else:
            create.append(index)
    stale = [pk for pks in by_hash.values() for pk in pks]
    return stale, moves, create


def _create_message_memories(chat: Chat, indices: list[int]) -> None:
    """A `message` memory, without a vector yet, for each of these messages, a thousand at a time."""
    for start in range(0, len(indices), 1000):
        chunk = indices[start : start + 1000]
        rows = Message.objects.filter(chat_id=chat.pk, index__in=chunk).values_list(
            "index", "name", "mes", "send_date"
        )
        memories = []
        for index, name, mes, send_date in rows:
            content = message_content(name=name, mes=mes)
            memories.append(
                Memory(
                    user_id=chat.user_id,
                    chat_id=chat.pk,
                    kind=Kind.MESSAGE,
                    content=content,
                    content_hash=text_hash(content),
                    message_index=index,
                    source_chat_id=chat.pk,
                    source_message_indices=[index],
                    occurred_at=parse_send_date(send_date),
                )
            )
        models_copy(Memory, memories)


def chat_index_refresh(*, chat: Chat) -> dict[str, int] | None:
    """What an index task does before embedding: reconcile the chat's message memories, then bring its memory schema
    up to date (after, so that the first schema step, which indexes chats from before the recall layer, finds the
    chat indexed and does nothing). None when the chat was deleted meanwhile: the run ends quietly."""
    try:
        counts = chat_index_messages(chat_id=chat.pk)
        chat_schema_ensure(chat=chat)
    except IntegrityError:
        # The rows written refer to a chat deleted while they were written (their foreign keys are checked at commit).
        if Chat.objects.filter(pk=chat.pk).exists():
            raise
        return None
    return counts


def _first_changed(existing, *, stale: list[int], moves: list[tuple[int, int]], create: list[int]) -> int | None:
    """The lowest index whose message text changed: a memory dropped or moved, or one made at or before the last
    indexed message (an edit, a swipe, an emptied message filled). Memories made past it are appends."""
    old_index = {pk: index for pk, index, _ in existing}
    last = max(old_index.values(), default=-1)
    changed = [old_index[pk] for pk in stale]
    changed += [min(old_index[pk], index) for pk, index in moves]
    changed += [index for index in create if index <= last]
    return min(changed, default=None)


def _needs_vector(config: EmbeddingConfig) -> Q:
    return Q(embedding__isnull=True) | ~Q(embedding_model=config.key)


def memories_embed_pending(*, user_id: int, chat_id: int | None = None, max_batches: int | None = None) -> int:
    """Embed the user's memories lacking a vector under their current model (first those of `chat_id`, if given),
    a batch at a time. Each batch is claimed: its rows stay locked (FOR NO KEY UPDATE SKIP LOCKED) until their
    vectors are written and the batch commits, so runs in several worker processes share one user's backlog and
    never embed a row twice. Answers how many memories got a vector."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        return 0
    config = config_for(user)
    if not config.enabled:
        return 0
    done = batches = 0
    scopes = [Q(chat_id=chat_id), Q()] if chat_id else [Q()]
    for scope in scopes:
        while max_batches is None or batches < max_batches:
            with transaction.atomic():
                claimed = list(
                    Memory.objects.select_for_update(skip_locked=True, no_key=True)
                    .filter(_needs_vector(config), scope, user_id=user_id)
                    .order_by("id")
                    .only("id", "content")[:EMBED_BATCH]
                )
                if claimed:
                    # Locked rows cannot change meanwhile: the vectors are of the text they hold.
                    vectors = embed_texts(config, [memory.content for memory in claimed])
                    _vectors_store(claimed, vectors, model_key=config.key)
            if not claimed:
                break
            done += len(claimed)
            batches += 1
    return done


def _vectors_store(memories: list[Memory], vectors: list[list[float]], *, model_key: str) -> None:
    """Write a batch's vectors in one statement, ids and vectors as two arrays (bulk_update's CASE over every id
    cost more in Python and in PostgreSQL)."""
    with vector_writer() as cursor:
        cursor.execute(
            """
            UPDATE memories_memory m
            SET embedding = u.vector, embedding_dim = vector_dims(u.vector), embedding_model = %s
            FROM unnest(%s::bigint[], %b::vector[]) AS u(id, vector)
            WHERE m.id = u.id
            """,
            [model_key, [memory.pk for memory in memories], vectors_array(vectors)],
        )


def embedding_backlog(*, user_id: int, chat_id: int) -> int:
    """How many of the chat's memories wait for a vector: how many runs are worth starting for it. When none of
    the chat's do, 1 if any other of the user's memories does (left by a provider that was down, say): one run
    then embeds those."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(pk=user_id).first()
    config = config_for(user) if user is not None else None
    if config is None or not config.enabled:
        return 0
    waiting = Memory.objects.filter(_needs_vector(config), user_id=user_id)
    return waiting.filter(chat_id=chat_id).count() or int(waiting.exists())


def chat_index_progress(*, chat: Chat) -> dict[str, int]:
    """How many of the chat's messages are indexed for recall as they are now (right text, current model's
    vector), and how many wait. With embeddings switched off, indexed means findable by text.

    The chat's (index, text hash) pairs of its messages and of its message memories are intersected, each side read
    once and each message hashed once, in a plan whose cost grows with the chat. A join, or a lookup per message,
    let the planner pair every message with every memory of the chat while an import's statistics were stale (the
    chat's rows not analysed yet, so estimated at one): a 663-message chat's progress took 114-175 ms, at every look
    of a progress bar."""
    config = config_for(chat.user)
    model_check = "AND mm.embedding_model = %s" if config.enabled else "AND %s = %s"
    params = [config.key] if config.enabled else ["", ""]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT (SELECT count(*) FROM chats_message m WHERE m.chat_id = %s AND m.mes <> ''),
                   (SELECT count(*) FROM (
                        SELECT m.index, {HASH_SQL} FROM chats_message m WHERE m.chat_id = %s AND m.mes <> ''
                        INTERSECT ALL
                        SELECT mm.message_index, mm.content_hash FROM memories_memory mm
                        WHERE mm.chat_id = %s AND mm.kind = 'message' {model_check}
                    ) matched)
            """,
            [chat.pk, chat.pk, chat.pk, *params],
        )
        total, indexed = cursor.fetchone()
    return {"indexable_messages": total, "indexed_messages": indexed, "pending": max(total - indexed, 0)}
