"""The gateway's tests: the person's connection a request's `model` names, for tests that prepare a completion and
never reach the model (its address answers nothing); and memories left unembedded, as the server serving the gateway
in a test does not embed (tests/servers.py)."""

from __future__ import annotations

import pytest

from apps.llm.services import connection_create


@pytest.fixture
def connection(user):
    return connection_create(
        user=user, name="scripted", base_url="http://127.0.0.1:9/v1", model="scripted-model",
        api_key="sk-test-1234567890abcd", is_default=True,
    )  # fmt: skip


@pytest.fixture
def no_embeddings(settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"
