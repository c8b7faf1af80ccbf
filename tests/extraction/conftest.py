"""Extraction tests: the scripted model (tests/llm_server.py, real HTTP) answers each tier's prompt by its task
line with a small story's worth of output (tests/extraction/helpers.py); the scripted embedder
(tests/memories/fixtures.py) gives vectors. `model` and `story` are in tests/extraction/fixtures.py, shared with
the injection tests."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from apps.chats.services.chats import chat_create
from apps.extraction.models import Scene
from apps.extraction.services.tiers.scenes import store_recap
from tests.extraction.helpers import FIRST, SECOND, add_turns, versions


@pytest.fixture
def other_story(db):
    other = get_user_model().objects.create_user(username="carol", password="x")
    return chat_create(user=other, title="Not yours")


@pytest.fixture
def scene(model, story):
    """A closed scene of the story with two recap versions, the second current (and stored as its memory)."""
    add_turns(story, 14)
    scene = Scene.objects.create(
        user=story.user,
        chat=story,
        start_index=0,
        end_index=12,
        cue="time: “The next morning”",
        recap_versions=versions(FIRST, SECOND),
        current_version=1,
    )
    store_recap(chat=story, scene=scene, recap=SECOND, call=None, previous=None)
    scene.refresh_from_db()
    return scene
