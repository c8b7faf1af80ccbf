"""What the memories app tells the apps built on it (they subscribe in their AppConfig.ready; memories never imports
them)."""

from django.dispatch import Signal

# The recall index reconciled a chat whose text changed (messages made, moved or deleted), with `chat_id`, from the
# indexing task: the extraction pipeline plans its tiers (apps/extraction/receivers.py).
chat_text_changed = Signal()
# A retired memory was restored by its owner, with `memory` (inside the restore's transaction): multi-device sync
# takes its tombstone back, so the instances that deleted it get it again (apps/sync/receivers.py).
memory_restored = Signal()
