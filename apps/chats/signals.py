"""What the chats app tells the apps built on it. They subscribe (in their AppConfig.ready); chats never imports them.

The character signals are sent with `character`; each receiver answers a dict of counts, and the sender adds them
up.
"""

from django.dispatch import Signal

# Inside the deletion's transaction, the character locked and not yet deleted, with `delete_chat_memories`: make
# ready for the deletion; answer {"memories_deleted": n, "memories_kept": k}.
character_deleting = Signal()
# Before a person confirms the deletion: what it would take; answer {"own": n, "from_chats": k}.
character_delete_preview = Signal()
# A chat's messages or header were written (every write: chat_touch and the import), with `chat_id`, inside the
# write's transaction. Receivers act once it commits (transaction.on_commit): the recall index follows the chat
# (apps/memories/receivers.py) and the extraction pipeline wakes (apps/extraction/receivers.py).
chat_written = Signal()
# Asked for a chat's progress in the apps above (sent with `chat` when its API answer is made): each receiver
# answers a dict of counts the answer includes (the recall index: `indexed_messages`, `pending`).
chat_progress = Signal()
