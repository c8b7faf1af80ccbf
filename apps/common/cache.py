"""Django's Redis cache backend with one client, and so one connection pool, per process and configuration.

Django makes a cache object per request context (its `caches` are context-local), and under ASGI every request is a
context of its own: each made a Redis client and pool of its own, so every request opened a TCP connection to
Valkey for the rate limit's count, and left it for the garbage collector to close. Shared, the pool keeps its
connections open across requests (redis-py's pools are thread-safe, and start afresh in a forked process).
"""

from __future__ import annotations

import threading

from django.core.cache.backends.redis import RedisCache
from django.utils.functional import cached_property

_clients: dict[str, object] = {}
_clients_lock = threading.Lock()


class SharedPoolRedisCache(RedisCache):
    @cached_property
    def _cache(self):
        key = repr((self._servers, sorted(self._options.items())))
        with _clients_lock:
            if key not in _clients:
                _clients[key] = self._class(self._servers, **self._options)
            return _clients[key]
