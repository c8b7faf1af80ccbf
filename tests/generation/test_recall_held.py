"""A reply's recall leaves out the turns its prompt's history holds: after a first reply, from the first message
that reply's prompt held (not only the last `recent_messages`), so an old turn is never sent twice, in the history
and again as recalled."""

import json

import pytest

from apps.chats.services.chats import chat_import
from apps.generation.models import Generation
from tests.memories.helpers import jsonl

pytestmark = pytest.mark.django_db

KEY = "Mira hid the brass key under the third stair."


@pytest.fixture
def long_chat(user, character, scripted, django_capture_on_commit_callbacks):
    """40 turns, the third of which says where the key is; every turn indexed as a message memory."""
    turns = [("Mira" if n % 2 else "Rowan", f"Turn {n}: the tide, the gulls, the harbour wall.") for n in range(40)]
    turns[3] = ("Mira", KEY)
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(*turns), title="Harbour")
    chat.characters.add(character)
    return chat


def _sent(llm) -> str:
    return json.dumps(llm.server.requests[-1]["body"]["messages"])


def test_an_old_turn_the_history_holds_is_not_recalled_beside_it(
    api, long_chat, llm, django_capture_on_commit_callbacks
):
    url = f"/api/v1/chats/{long_chat.pk}/generate"
    with django_capture_on_commit_callbacks(execute=True):
        first = api.post(url, {"message": "Where is the brass key?", "stream": False}, format="json")
    assert first.status_code == 200, first.content
    held = Generation.objects.get().prompt_info["history_from"]
    assert held == 0  # the whole chat fits: turn 3 is in the history
    # Before a first reply only the last 30 turns are taken to be in the prompt: turn 3 is recalled too.
    assert _sent(llm).count(KEY) == 2

    second = api.post(url, {"message": "And the brass key, again?", "stream": False}, format="json")
    assert second.status_code == 200, second.content
    assert _sent(llm).count(KEY) == 1  # in the history only
