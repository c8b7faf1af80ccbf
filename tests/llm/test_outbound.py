"""The async client the streaming client uses holds to the outbound-call guard of apps/common/netguard.py: on a
deployment that refuses private addresses, a connection goes only to an address just resolved and allowed (the one
checked is the one connected to), a name with any refused address gets nowhere, and no redirect is followed."""

import asyncio
import ipaddress

import httpx
import pytest

from apps.llm.outbound import AsyncGuardedTransport, guarded_async_client


@pytest.fixture
def public_deployment(settings):
    """Production's policy; the operator allows 127.0.0.1 so that the scripted server stands for a public host."""
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    settings.LOREKEEPER_PROVIDER_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    return settings


def _resolver(*addresses: str):
    asked: list[str] = []

    async def resolve(host, port):
        asked.append(host)
        return [ipaddress.ip_address(address) for address in addresses]

    resolve.asked = asked
    return resolve


def _post(client: httpx.AsyncClient, url: str) -> httpx.Response:
    async def go():
        async with client:
            return await client.post(url, json={"model": "m", "messages": [], "stream": False})

    return asyncio.run(go())


def test_a_name_goes_to_the_allowed_address_it_resolved_to(public_deployment, llm_server):
    resolve = _resolver("127.0.0.1")
    response = _post(
        guarded_async_client(timeout=5, resolve=resolve), f"http://model.example:{llm_server.port}/v1/chat/completions"
    )
    assert response.status_code == 200 and resolve.asked == ["model.example"]
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("addresses", [("10.0.0.1",), ("127.0.0.1", "192.168.1.10"), ("169.254.169.254",)])
def test_a_name_with_any_refused_address_gets_nowhere(public_deployment, llm_server, addresses):
    client = guarded_async_client(timeout=5, resolve=_resolver(*addresses))
    with pytest.raises(httpx.ConnectError, match="private or local"):
        _post(client, f"http://model.example:{llm_server.port}/v1/chat/completions")
    assert llm_server.requests == []


def test_a_private_address_is_refused_without_resolving(public_deployment, llm_server):
    with pytest.raises(httpx.ConnectError, match="private or local"):
        _post(guarded_async_client(timeout=5), "http://10.1.2.3:9/v1/chat/completions")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_self_hosted_install_reaches_its_own_network(llm_server, host):
    response = _post(guarded_async_client(timeout=5), f"http://{host}:{llm_server.port}/v1/chat/completions")
    assert response.status_code == 200


def test_redirects_are_not_followed_and_proxies_not_used():
    client = guarded_async_client(timeout=5)
    assert client.follow_redirects is False and client._trust_env is False
    transport = AsyncGuardedTransport()
    # The pool replaced is the one httpx's transport sends through (httpx 0.28's `_pool`).
    assert type(transport._pool).__name__ == "AsyncConnectionPool"
    assert type(transport._pool._network_backend).__name__ == "_AsyncGuardedBackend"
