"""Calls the server makes on a user's behalf reach only globally routable addresses on a public deployment: every
range of the special-purpose registries refused, default URLs held to the same rule, no redirect followed, the
address checked the address connected to, no upstream body echoed; the operator's own endpoint trusted."""

import ipaddress
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from apps.common.exceptions import ApplicationError
from apps.common.netguard import BLOCKED_MESSAGE, GuardedTransport, globally_routable, provider_url_check
from apps.llm.client import LlmError, complete
from apps.llm.models import Connection
from apps.llm.services import connection_create, connection_test
from apps.memories.embeddings import EmbeddingUnavailable, config_for, deployment_config, embed_texts
from apps.memories.models import EmbeddingSettings
from apps.memories.services.settings import embedding_settings_set
from tests.llm_server import Reply
from tests.memories.embedding_server import start_server

pytestmark = pytest.mark.django_db

ALLOWED_LOOPBACK = "127.0.0.2"  # stands for a public address: the operator allows it in these tests


@pytest.fixture
def public_deployment(settings):
    """Production's policy: users' URLs may not reach private or local addresses; 127.0.0.2 plays a public host."""
    settings.LOREKEEPER_PROVIDER_PRIVATE_HOSTS = False
    settings.LOREKEEPER_PROVIDER_ALLOWED_NETWORKS = [f"{ALLOWED_LOOPBACK}/32"]
    return settings


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request with the server's scripted status and Location, and records the path."""

    def log_message(self, *args) -> None:
        pass

    def _answer(self) -> None:
        self.server.paths.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(self.server.status)
        if self.server.location:
            self.send_header("Location", self.server.location)
        body = b'{"error": "internal admin page: secret-token-abc"}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer


@pytest.fixture
def recorder():
    """An HTTP server on 127.0.0.2 (allowed in `public_deployment`); a test sets `status` and `location`."""
    servers = []

    def start(host: str = ALLOWED_LOOPBACK, status: int = 200, location: str = ""):
        server = ThreadingHTTPServer((host, 0), _Recorder)
        server.paths, server.status, server.location = [], status, location
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------------------- the address policy


@pytest.mark.parametrize(
    "address",
    [
        "100.100.100.200",  # a cloud metadata address in carrier-grade NAT space
        "100.64.0.1",
        "192.0.0.8",
        "192.0.0.170",
        "169.254.169.254",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "127.0.0.1",
        "0.0.0.0",
        "198.18.0.1",
        "192.88.99.1",
        "224.0.0.1",
        "255.255.255.255",
        "2002:a00:1::1",  # 6to4 of 10.0.1.0
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "::ffff:10.0.0.1",
        "2001::1",  # Teredo
        "2001:db8::1",
        "fd00::1",
        "fe80::1",
        "::1",
        "ff02::1",
    ],
)
def test_special_purpose_addresses_are_refused(public_deployment, address):
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(ApplicationError) as refused:
        provider_url_check(f"http://{host}:8080/v1")
    assert refused.value.message == BLOCKED_MESSAGE and refused.value.extra == {"field": "base_url"}


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"])
def test_globally_routable_unicast_addresses_are_allowed(address):
    assert globally_routable(ipaddress.ip_address(address))


def test_a_name_resolving_to_loopback_is_refused(public_deployment):
    with pytest.raises(ApplicationError, match="private or local"):
        provider_url_check("http://localhost:11434")


def test_the_production_settings_refuse_private_addresses():
    """The policy production runs with, loaded as a deployment loads it."""
    script = (
        "import django; django.setup()\n"
        "from apps.common.netguard import provider_url_check\n"
        "for url in ('http://100.100.100.200/v1', 'http://127.0.0.1:11434'):\n"
        "    try:\n"
        "        provider_url_check(url)\n"
        "        print('allowed', url)\n"
        "    except Exception as exc:\n"
        "        print('refused', url)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production", "SECRET_KEY": "x" * 50}
    env.pop("LOREKEEPER_PROVIDER_PRIVATE_HOSTS", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["refused http://100.100.100.200/v1", "refused http://127.0.0.1:11434"]


# ----------------------------------------------------------------------------------------- default URLs checked


def test_a_users_ollama_embeddings_without_url_do_not_reach_the_servers_loopback(public_deployment, user):
    """Saved before the policy applied (or through any other path), the default URL meets the policy at the call."""
    EmbeddingSettings.objects.create(user=user, provider="ollama", model="nomic-embed-text", base_url="")
    with pytest.raises(EmbeddingUnavailable) as unavailable:
        embed_texts(config_for(user), ["a secret memory"])
    assert str(unavailable.value) == BLOCKED_MESSAGE


def test_saving_ollama_embeddings_without_url_is_refused_on_a_public_deployment(public_deployment, user):
    with pytest.raises(ApplicationError) as refused:
        embedding_settings_set(user=user, provider="ollama", model="nomic-embed-text")
    assert refused.value.extra == {"field": "base_url"}
    assert not EmbeddingSettings.objects.filter(user=user).exists()


def test_the_operators_own_embeddings_endpoint_on_the_private_network_is_trusted(public_deployment):
    server = start_server()
    try:
        public_deployment.LOREKEEPER_EMBEDDINGS_PROVIDER = "openai"
        public_deployment.LOREKEEPER_EMBEDDINGS_MODEL = "m"
        public_deployment.LOREKEEPER_EMBEDDINGS_URL = f"{server.url}/v1"  # 127.0.0.1: private
        vectors = embed_texts(deployment_config(), ["the operator's GPU box"])
    finally:
        server.stop()
    assert len(vectors) == 1 and server.embedded_texts() == ["the operator's GPU box"]


# ------------------------------------------------------------------------------------------------ no redirects


def test_a_users_embeddings_url_that_redirects_to_a_private_address_gets_no_texts(public_deployment, user, recorder):
    private = start_server()  # 127.0.0.1: what the redirect points at
    try:
        public = recorder(status=307, location=f"{private.url}/v1/embeddings")
        EmbeddingSettings.objects.create(
            user=user, provider="openai", model="m", base_url=f"http://{ALLOWED_LOOPBACK}:{public.server_port}/v1"
        )
        with pytest.raises(EmbeddingUnavailable):
            embed_texts(config_for(user), ["a secret memory"])
        assert public.paths == ["/v1/embeddings"]
        assert private.requests == []
    finally:
        private.stop()


@pytest.mark.parametrize("api", ["openai", "ollama"])
def test_a_model_url_that_redirects_is_not_followed(public_deployment, user, recorder, llm_server, api):
    public = recorder(status=307, location=f"{llm_server.url}/chat/completions")
    base = f"http://{ALLOWED_LOOPBACK}:{public.server_port}" + ("/v1" if api == "openai" else "")
    connection = connection_create(user=user, name="m", api=api, base_url=base, model="m")
    with pytest.raises(LlmError):
        complete(connection, [{"role": "user", "content": "hello"}], purpose="test", retries=0)
    assert len(public.paths) == 1 and llm_server.requests == []


# --------------------------------------------------------------------------------- the checked address is used


def test_the_guarded_transport_connects_to_the_address_it_checked(public_deployment, recorder):
    """A name that resolves to an allowed address for the check and to a private one a moment later (DNS rebinding)
    is resolved once per connection, and the connection goes to the address that was checked."""
    public = recorder()
    answers = [[ipaddress.ip_address(ALLOWED_LOOPBACK)], [ipaddress.ip_address("127.0.0.1")]]
    asked = []

    def rebinding(host, port):
        asked.append(host)
        return answers[min(len(asked) - 1, 1)]

    with httpx.Client(transport=GuardedTransport(resolve=rebinding)) as client:
        assert client.get(f"http://rebind.example:{public.server_port}/first").status_code == 200
        assert public.paths == ["/first"] and asked == ["rebind.example"]
    with httpx.Client(transport=GuardedTransport(resolve=rebinding)) as client:  # a new connection: resolved again
        with pytest.raises(httpx.ConnectError, match="private or local"):
            client.get(f"http://rebind.example:{public.server_port}/second")
    assert public.paths == ["/first"]


def test_the_guarded_transport_refuses_a_name_with_any_private_address(public_deployment, recorder):
    public = recorder()

    def mixed(host, port):
        return [ipaddress.ip_address(ALLOWED_LOOPBACK), ipaddress.ip_address("10.0.0.1")]

    with httpx.Client(transport=GuardedTransport(resolve=mixed)) as client:
        with pytest.raises(httpx.ConnectError):
            client.get(f"http://mixed.example:{public.server_port}/")
    assert public.paths == []


# ---------------------------------------------------------------------------------------- no upstream body echo


@pytest.mark.parametrize("api", ["openai", "ollama"])
def test_a_connection_test_says_the_status_not_the_upstream_body(user, llm_server, api):
    base = llm_server.url if api == "openai" else llm_server.ollama_url
    connection = connection_create(user=user, name="m", api=api, base_url=base, model="m")
    llm_server.on(lambda prompt: True, Reply(status=404, raw='{"detail": "internal service: redis 7.2 on 10.0.0.5"}'))
    tested = connection_test(connection=connection)
    assert tested.last_test_ok is False
    assert tested.last_test_message == "the server refused the request (404): Not Found"
    assert "redis" not in Connection.objects.get(pk=connection.pk).last_test_message
