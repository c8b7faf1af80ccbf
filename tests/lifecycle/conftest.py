"""Lifecycle tests: the scripted embedder (tests/memories/conftest.py) with vectors chosen per text, so a pair's
cosine is exactly what the test says, and the scripted model (tests/llm_server.py) answering by prompt."""

from __future__ import annotations

import math

import pytest

from apps.chats.services.chats import chat_create
from apps.memories.services.lifecycle.classify import Candidate, memories_submit
from tests.chats.factories import CharacterFactory
from tests.memories.conftest import DIM, embedder, scripted  # noqa: F401 — fixtures shared with the store's tests

SUPERSESSION = "Answer UPDATE, DUPLICATE, INDEPENDENT or CONTRADICTS."


def at_cosine(cosine: float, *, axis: int = 0) -> list[float]:
    """A unit vector whose cosine to the unit vector of `axis` is `cosine` (the rest lies on the next axis)."""
    vector = [0.0] * DIM
    vector[axis] = cosine
    vector[(axis + 1) % DIM] = math.sqrt(max(0.0, 1 - cosine * cosine))
    return vector


def unit(axis: int) -> list[float]:
    return at_cosine(1.0, axis=axis)


@pytest.fixture
def character(user):
    return CharacterFactory(user=user, name="Mira")


@pytest.fixture
def chat(user, character):
    return chat_create(user=user, title="Harbour", character_ids=[character.pk])


@pytest.fixture
def submit(user, character):
    """Classify candidates into the character's scope (or `chat=`), one at a time; the list of results."""

    def run(*candidates, **kwargs):
        kwargs.setdefault("character", None if "chat" in kwargs else character)
        made = [c if isinstance(c, Candidate) else Candidate(kind=c[0], content=c[1]) for c in candidates]
        return memories_submit(user=user, candidates=made, **kwargs)

    return run


@pytest.fixture
def llm(user, llm_server):
    """The user's default connection to the scripted model, profile B (hosted) so the reference thresholds apply
    (127.0.0.1 alone would be detected as a local, profile A, server)."""
    from apps.llm.services import connection_create

    connection = connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="scripted-model", profile="B", api_key="sk-x"
    )
    connection.server = llm_server
    return connection
