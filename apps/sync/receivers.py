"""What multi-device sync does when the apps below it say something happened (apps/memories/signals.py). Connected
in SyncConfig.ready."""

from __future__ import annotations

from django.dispatch import receiver

from apps.memories.signals import memory_restored
from apps.sync.services.feed import feed_revive


@receiver(memory_restored, dispatch_uid="sync.memory_restored")
def _revive_restored_memory(sender, *, memory, **kwargs) -> None:
    feed_revive(user_id=memory.user_id, kind="memory", uid=memory.uid)
