"""The async session the streaming client uses holds to the outbound-call guard of apps/common/netguard.py: on a
deployment that refuses private addresses, a connection goes only to an address just resolved and allowed (the one
checked is the one connected to), a name with any refused address gets nowhere, an address written in the URL is
checked too, and neither a redirect nor the environment's proxy is followed."""

import asyncio
import ipaddress

import aiohttp
import pytest

from apps.common.netguard import BLOCKED_MESSAGE, Blocked
from apps.llm.outbound import guarded_session
from tests.llm_server import Reply


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


def _post(url: str, **session) -> int:
    """The status of a chat request to `url` through a guarded session."""

    async def go():
        async with guarded_session(timeout=5, **session) as http:
            body = {"model": "m", "messages": [], "stream": False}
            async with http.post(url, json=body, allow_redirects=False) as response:
                return response.status

    return asyncio.run(go())


def _refused(url: str, **session) -> aiohttp.ClientConnectorError:
    with pytest.raises(aiohttp.ClientConnectorError) as caught:
        _post(url, **session)
    assert isinstance(caught.value.os_error, Blocked) and str(caught.value.os_error) == BLOCKED_MESSAGE
    return caught.value


def test_a_name_goes_to_the_allowed_address_it_resolved_to(public_deployment, llm_server):
    resolve = _resolver("127.0.0.1")
    status = _post(f"http://model.example:{llm_server.port}/v1/chat/completions", resolve=resolve)
    assert status == 200 and resolve.asked == ["model.example"]
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("addresses", [("10.0.0.1",), ("127.0.0.1", "192.168.1.10"), ("169.254.169.254",)])
def test_a_name_with_any_refused_address_gets_nowhere(public_deployment, llm_server, addresses):
    _refused(f"http://model.example:{llm_server.port}/v1/chat/completions", resolve=_resolver(*addresses))
    assert llm_server.requests == []


@pytest.mark.parametrize("host", ["10.1.2.3", "[::1]", "127.0.0.2"])
def test_an_address_in_the_url_is_checked_though_never_resolved(public_deployment, llm_server, host):
    resolve = _resolver("127.0.0.1")
    _refused(f"http://{host}:{llm_server.port}/v1/chat/completions", resolve=resolve)
    assert resolve.asked == [] and llm_server.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_self_hosted_install_reaches_its_own_network(llm_server, host):
    assert _post(f"http://{host}:{llm_server.port}/v1/chat/completions") == 200


def test_a_redirect_is_answered_not_followed(public_deployment, llm_server):
    llm_server.on(lambda prompt: True, Reply(status=307, headers={"Location": "http://10.0.0.1/v1/chat/completions"}))
    assert _post(f"http://127.0.0.1:{llm_server.port}/v1/chat/completions") == 307
    assert len(llm_server.requests) == 1


def test_the_environments_proxy_is_not_used(llm_server, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    assert _post(f"http://127.0.0.1:{llm_server.port}/v1/chat/completions") == 200
