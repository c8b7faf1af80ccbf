"""The scripted embedding server as fixtures (tests/memories/embedding_server.py), for every suite that embeds:
registered in tests/conftest.py through `pytest_plugins`."""

from __future__ import annotations

import pytest

from tests.memories.embedding_server import DIM, EmbeddingServer, start_server


@pytest.fixture
def embedder():
    """The scripted server, not yet used by anyone (see `scripted`)."""
    state = start_server()
    yield state
    state.stop()


@pytest.fixture
def scripted(embedder, settings):
    """The deployment embeds through the scripted server (OpenAI-compatible), model `scripted`."""
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "openai"
    settings.LOREKEEPER_EMBEDDINGS_MODEL = "scripted"
    settings.LOREKEEPER_EMBEDDINGS_URL = f"{embedder.url}/v1"
    settings.LOREKEEPER_EMBEDDINGS_API_KEY = "deployment-key"
    return embedder


@pytest.fixture
def start_embedder():
    """Start more scripted servers (of another dimension, say); all are stopped after the test."""
    started: list[EmbeddingServer] = []

    def start(dim: int = DIM) -> EmbeddingServer:
        started.append(start_server(dim))
        return started[-1]

    yield start
    for state in started:
        state.stop()
