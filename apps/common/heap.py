"""The web process's heap, settled once it has booted (config/asgi.py).

A web worker holds about a million objects from its start (Django, PyTorch and the embedding model, the
tokenizers), and Python's cyclic garbage collector walks every one of them at each full collection: about 300 ms
with the event loop and the request in hand stopped (measured in a gunicorn worker under bench/gateway.py, 64
requests on a 5,000-message chat: four full collections, 260–370 ms each). What was loaded at the start lives as
long as the process, so it is frozen out of the collector's view (`gc.freeze`). The full collections then walk only
what the requests made since, but would come about every fourth request: Python starts one when the objects
promoted since the last one pass a quarter of those it kept, and with the start frozen it keeps few. The third
threshold (how many middle-generation collections before a full one is considered; 10 by default) is raised to 100,
so a full collection comes about as rarely as before (once in those 64 requests, 51 ms).
"""

from __future__ import annotations

import gc

FULL_AFTER = 100  # middle-generation collections between full ones (Python's default: 10)


def heap_settle() -> None:
    """Collect once, freeze what survives (the process's start), and space the full collections out."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_AFTER)
