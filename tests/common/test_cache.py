"""The Redis cache backend keeps one connection pool per process, though Django makes a cache object per request."""

import threading

import pytest
import redis
from django.core.cache import caches


@pytest.fixture
def valkey(broker, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "apps.common.cache.SharedPoolRedisCache",
            "LOCATION": broker,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
            "KEY_PREFIX": "test",
        }
    }
    return redis.Redis.from_url(broker)


def _connections_received(server: redis.Redis) -> int:
    return int(server.info("stats")["total_connections_received"])


def test_requests_in_contexts_of_their_own_share_one_connection(valkey):
    seen: list[object] = []

    def request(n: int) -> None:
        # A thread starts with an empty context, as an ASGI request does: Django makes it a cache object of its own.
        cache = caches["default"]
        seen.append(cache)
        cache.set(f"count:{n}", n)
        assert cache.get(f"count:{n}") == n

    before = _connections_received(valkey)
    for n in range(20):
        thread = threading.Thread(target=request, args=(n,))
        thread.start()
        thread.join()
    assert len({id(cache) for cache in seen}) == 20  # twenty cache objects, as under ASGI
    assert _connections_received(valkey) - before == 1  # one connection, kept open between the requests
