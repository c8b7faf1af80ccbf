"""A blocking call (`complete`) and a stream (`stream_chat`) go out on one transport (apps/llm/transport/): the
same server failure reads the same to a person and on the Call record, and the same address guard refuses a
connection at the socket, for both APIs.

The stream's Call is written through `sync_to_async` (another thread, another database connection), hence
`transaction=True`."""

from __future__ import annotations

import asyncio
import socket

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from apps.common.netguard import BLOCKED_MESSAGE
from apps.llm.client import LlmError, complete
from apps.llm.models import Call
from apps.llm.services import connection_create
from apps.llm.streaming import stream_chat
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = [{"role": "user", "content": "Say hello to Ada"}]
BOTH_APIS = pytest.mark.parametrize("api", ["openai", "ollama"])


@pytest.fixture(autouse=True)
def _close_the_recording_threads_connection():
    yield
    asyncio.run(sync_to_async(connections.close_all)())


def _connection(user, base_url: str, api: str):
    return connection_create(user=user, name=f"scripted {api}", api=api, base_url=base_url, model="m", api_key="k")


def _base_url(server, api: str) -> str:
    return server.url if api == "openai" else server.ollama_url


def _blocking_error(connection) -> LlmError:
    with pytest.raises(LlmError) as caught:
        complete(connection, HELLO, purpose="test")
    return caught.value


def _stream_error(connection) -> LlmError:
    async def read():
        async for _ in stream_chat(connection, HELLO, purpose="chat", user_id=connection.user_id):
            pass

    with pytest.raises(LlmError) as caught:
        asyncio.run(read())
    return caught.value


@BOTH_APIS
@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply(status=500),
        Reply(status=401),
        Reply(raw="<html>a proxy's error page</html>"),
    ],
    ids=["429 with Retry-After", "500", "a refusal", "a body that is not JSON"],
)
def test_a_blocking_call_and_a_stream_say_the_same_of_the_same_failure(user, llm_server, settings, api, reply):
    settings.LOREKEEPER_LLM = {**settings.LOREKEEPER_LLM, "retries": 1, "backoff": 0.01}
    connection = _connection(user, _base_url(llm_server, api), api)
    llm_server.on("Say hello", reply)

    blocking, streamed = _blocking_error(connection), _stream_error(connection)

    assert blocking.message == streamed.message
    assert blocking.message.startswith(("rate limited", "server error", "the server refused", "unreadable answer"))
    calls = Call.objects.order_by("id")
    recorded = [("error", blocking.message, blocking.call.attempts)] * 2
    assert [(c.status, c.error, c.attempts) for c in calls] == recorded
    assert [c.purpose for c in calls] == ["test", "chat"]


@BOTH_APIS
def test_a_name_rebound_to_a_refused_address_is_refused_at_the_connection_for_both(
    user, llm_server, settings, monkeypatch, api
):
    """The URL check sees an allowed address; the connection a moment later would go to a private one (DNS
    rebinding). The one guard refuses it at the socket, for a blocking call as for a stream."""
    base_url = _base_url(llm_server, api).replace("127.0.0.1", "model.example")
    connection = _connection(user, base_url, api)
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    settings.LOREKEEPER_PROVIDER_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the scripted server plays a public host
    settings.LOREKEEPER_LLM = {**settings.LOREKEEPER_LLM, "retries": 0}
    real_getaddrinfo, lookups = socket.getaddrinfo, []

    def rebinding(host, port, *args, **kwargs):
        if host not in ("model.example", b"model.example"):  # anyio asks in bytes
            return real_getaddrinfo(host, port, *args, **kwargs)
        lookups.append(host)
        return real_getaddrinfo("127.0.0.1" if len(lookups) % 2 else "10.0.0.1", port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)

    blocking, streamed = _blocking_error(connection), _stream_error(connection)

    assert blocking.message == streamed.message == BLOCKED_MESSAGE
    assert len(lookups) == 4  # each: the URL check, then the connection
    assert llm_server.requests == []
    assert [c.error for c in Call.objects.all()] == [BLOCKED_MESSAGE] * 2
