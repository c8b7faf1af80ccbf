"""A Python client for Lorekeeper's sync API (used by the tests and the benchmarks; usable by scripts).

It keeps the integrity of each chat it writes, serialises its writes per chat, gathers bursts of edits into one
patch (the debounce window, 1 s by default), sends every write with an Idempotency-Key (so a retry after a
network error or a 503 never applies twice), and on a 409 integrity conflict re-reads the chat's state with `delta`
and re-applies its pending change: the conflict loop Luker asks of its clients (docs/GLOSSARY.md).

    client = SyncClient("http://127.0.0.1:8720", token="lk_…")
    chat = client.chat(42)
    chat.append([{"name": "You", "is_user": True, "mes": "Hello"}])
    chat.edit(3, "mes", "A corrected line")      # debounced
    chat.flush()                                 # or wait for the window to pass

The package: `http` (SyncClient: the connection, and the retries after a network error, a 503 or a 429),
`chat` (ChatSync: one chat's write queue and its conflict loop), `instance` (InstanceSync: an offline instance's
cache, pushed and pulled), `errors` (what a failed answer raises).
"""

from lorekeeper_client.errors import SyncError
from lorekeeper_client.http import SyncClient

__all__ = ["SyncClient", "SyncError"]
