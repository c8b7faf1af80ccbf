"""Background work of the memory store: thin tasks over apps.memories.services.indexing.

Enqueueing never fails a request: if the broker is down the work is only late, because the periodic sweep finds
every chat whose messages are not indexed at its current integrity and every memory without a current vector.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_init, worker_process_init, worker_ready
from django.conf import settings
from django.db.models import F, Q

from apps.chats.models import Chat
from apps.common.tasks import task_send
from apps.memories.embeddings import EmbeddingUnavailable, config_for, deployment_config, local_model_load
from apps.memories.models import EmbeddingSettings, Memory, MemoryScope
from apps.memories.services import queue
from apps.memories.services.indexing import (
    EMBED_BATCH,
    chat_index_refresh,
    embedding_backlog,
    memories_embed_pending,
)
from apps.memories.services.own_indexes import own_index_due, own_index_users, own_indexes_refresh
from apps.memories.signals import chat_text_changed

log = logging.getLogger(__name__)


@shared_task(name="memories.index_chat", acks_late=True, soft_time_limit=1800, time_limit=1900)
def index_chat(chat_id: int) -> dict:
    """Reconcile a chat's message memories, then queue the runs that embed what lacks a vector (this chat's first).
    A chat deleted before or during the run ends it quietly.

    The embedding is queued rather than done here: an import of several chats queues a reconciliation for each, and
    a run started here held its process until the user's whole backlog was embedded, while the chats queued after
    this one waited to be reconciled, their messages not even findable by text (LoCoMo's six conversations: the last
    reconciled 8 s after its upload, bench/locomo_speed.py). Queued after those reconciliations, the runs find the
    whole backlog and claim full batches."""
    chat = Chat.objects.filter(pk=chat_id).first()
    if chat is None:
        return {}
    counts = chat_index_refresh(chat=chat)
    if counts is None:
        return {}
    if counts["created"] or counts["moved"] or counts["deleted"]:
        # The chat's text changed: the apps above react (the extraction pipeline plans its tiers, before the
        # embedding queued below, which it does not wait for). A hint: its sweep finds chats whose plan is behind.
        chat_text_changed.send(sender=Chat, chat_id=chat_id)
    # A long backlog is shared by several runs, in the worker's processes: each claims batches of its own
    # (indexing.py), and queues its next run (embed_pending).
    batches = -(-embedding_backlog(user_id=chat.user_id, chat_id=chat_id) // EMBED_BATCH)
    counts["embedding_runs"] = min(settings.LOREKEEPER_EMBEDDING_RUNS, batches)
    for _ in range(counts["embedding_runs"]):
        queue.enqueue_embed_pending(chat.user_id, chat_id)
    return counts


@shared_task(name="memories.embed_pending", acks_late=True, soft_time_limit=1800, time_limit=1900)
def embed_pending(user_id: int, chat_id: int | None = None) -> int:
    """Embed a batch of the user's memories lacking a vector (those of `chat_id` first), and queue the next run while
    there may be more. A batch a task: a long backlog (an import of thousands of turns) holds a worker process for
    one batch at a time, and what is queued meanwhile (the next chat's reconciliation, another user's messages) runs
    between its batches rather than after all of them."""
    # A provider that is down leaves the rest without vectors; text search covers them and the sweep tries again.
    try:
        embedded = memories_embed_pending(user_id=user_id, chat_id=chat_id, max_batches=1)
    except EmbeddingUnavailable as exc:
        log.warning("embedding for user %s postponed: %s", user_id, exc)
        return 0
    if embedded:
        queue.enqueue_embed_pending(user_id, chat_id)
    elif own_index_due(user_id=user_id):  # the backlog done: grown into an HNSW index of their own
        queue.enqueue_own_indexes(user_id)
    return embedded


@shared_task(name="memories.own_indexes", acks_late=True, soft_time_limit=3600, time_limit=3700)
def own_indexes(user_id: int) -> dict[int, str]:
    return own_indexes_refresh(user_id=user_id)


def _users_lacking_vectors(limit: int = 1000) -> list[int]:
    """Users with memories lacking a vector under the model they use now (the deployment's, or their own)."""
    deployment_key = deployment_config().key
    users: list[int] = []
    if deployment_key:
        lacking = Q(embedding__isnull=True) | ~Q(embedding_model=deployment_key)
        users += (
            Memory.objects.filter(lacking, user__embedding_settings__isnull=True)
            .values_list("user_id", flat=True)
            .distinct()[:limit]
        )
    for own in EmbeddingSettings.objects.select_related("user")[:limit]:
        key = config_for(own.user).key
        if key and Memory.objects.filter(Q(embedding__isnull=True) | ~Q(embedding_model=key), user=own.user).exists():
            users.append(own.user_id)
    return users


@shared_task(name="memories.sweep", soft_time_limit=300, time_limit=360)
def sweep() -> dict:
    """Enqueue what writes asked for but may not have got: chats not indexed at their current integrity, and users
    with memories lacking a vector under their current model."""
    stale_chats = Chat.objects.exclude(
        pk__in=MemoryScope.objects.filter(chat__isnull=False, indexed_integrity=F("chat__integrity")).values("chat_id")
    ).values_list("pk", flat=True)[:1000]
    stale_chats = list(stale_chats)
    for chat_id in stale_chats:
        queue.enqueue_index_chat(chat_id)
    users = _users_lacking_vectors()
    for user_id in users:
        queue.enqueue_embed_pending(user_id)
    # Indexes of their own that users have shrunk out of (deleted chats, a deleted account).
    shrunk = [user_id for user_id in own_index_users() if own_index_due(user_id=user_id)]
    for user_id in shrunk:
        queue.enqueue_own_indexes(user_id)
    return {"chats": len(stale_chats), "users": len(users), "own_indexes": len(shrunk)}


# --- lifecycle ----------------------------------------------------------------------------------------------------


@shared_task(name="memories.lifecycle_job", acks_late=True, soft_time_limit=3600, time_limit=3700)
def lifecycle_job(job_id: int) -> str:
    from apps.memories.services.lifecycle.jobs import lifecycle_job_run

    job = lifecycle_job_run(job_id=job_id)
    return job.state if job else "missing"


@shared_task(name="memories.hierarchy_tick", soft_time_limit=600, time_limit=660)
def hierarchy_tick() -> int:
    from apps.memories.services.lifecycle.jobs import hierarchy_tick as tick

    return tick()


@worker_ready.connect
def _catch_up_at_start(sender=None, **kwargs) -> None:
    """Periods missed while no worker ran are built now, not at the next quarter hour."""
    task_send(hierarchy_tick, countdown=5, catch_up="the next quarter-hour tick builds them")


@worker_init.connect
def _load_model_before_fork(sender=None, **kwargs) -> None:
    """The worker's main process loads the local model before it forks its pool: every process starts with it,
    sharing its weights, and the first chat of an import is embedded at once, not after each process's own several
    seconds of imports and loading (a fifth of the worker's time while six LoCoMo conversations were indexed). Only
    on one thread (LOREKEEPER_EMBEDDINGS_THREADS): with more, PyTorch starts a thread pool that a forked process
    inherits broken, and hangs at its first encode, and ONNX Runtime's pool is not one a forked process may count on
    either (its threads are not copied by fork); each process then loads its own as it starts."""
    if settings.LOREKEEPER_EMBEDDINGS_THREADS == 1:
        local_model_load(background=False)


@worker_process_init.connect
def _load_model_in_process(sender=None, **kwargs) -> None:
    """A pool process not given the model by its parent loads it in a thread as it starts, not in its first task."""
    local_model_load(background=True)
