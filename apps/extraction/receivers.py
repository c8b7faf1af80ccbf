"""What the extraction pipeline does when the apps below it say something happened (apps/chats/signals.py,
apps/memories/signals.py). Connected in ExtractionConfig.ready."""

from __future__ import annotations

from django.dispatch import receiver

from apps.chats.signals import chat_written
from apps.common.tasks import on_commit_once
from apps.extraction.services import queue
from apps.extraction.services.jobs import pipeline_wake
from apps.memories.signals import chat_text_changed


@receiver(chat_written, dispatch_uid="extraction.chat_written")
def _wake_on_write(sender, *, chat_id: int, **kwargs) -> None:
    """Woken at once: the pipeline reads the messages, not the recall index, so new messages need not wait for the
    index's debounce (the index wakes it again, durably, once it has noted what changed)."""
    on_commit_once(queue.enqueue_run, chat_id)


@receiver(chat_text_changed, dispatch_uid="extraction.chat_text_changed")
def _plan_on_text_change(sender, *, chat_id: int, **kwargs) -> None:
    pipeline_wake(chat_id=chat_id)
