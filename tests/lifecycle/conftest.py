"""Lifecycle tests: the scripted embedder (tests/memories/fixtures.py) with vectors chosen per text
(tests/lifecycle/helpers.py), so a pair's cosine is exactly what the test says, and the scripted model
(tests/llm_server.py) answering by prompt."""

from __future__ import annotations

import pytest

from apps.memories.services.lifecycle.classify import Candidate, memories_submit


@pytest.fixture
def submit(user, character):
    """Classify candidates into the character's scope (or `chat=`), one at a time; the list of results."""

    def run(*candidates, **kwargs):
        kwargs.setdefault("character", None if "chat" in kwargs else character)
        made = [c if isinstance(c, Candidate) else Candidate(kind=c[0], content=c[1]) for c in candidates]
        return memories_submit(user=user, candidates=made, **kwargs)

    return run


@pytest.fixture
def hosted_llm(user, llm_server):
    """The user's default connection to the scripted model, profile B (hosted) so the reference thresholds apply
    (127.0.0.1 alone would be detected as a local, profile A, server)."""
    from apps.llm.services import connection_create

    connection = connection_create(
        user=user,
        name="scripted",
        base_url=llm_server.url,
        model="scripted-model",
        profile="B",
        api_key="sk-x",
        is_default=True,
    )
    connection.server = llm_server
    return connection
