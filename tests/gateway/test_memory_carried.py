"""A front end whose prompt carries Lorekeeper's memory already (SillyTavern with the Lorekeeper extension on, its
chat pointed at the gateway too) is not given the memory a second time, and its Prompt page says why; one block
head alone, or the heads inside a history message, is not taken for it."""

from __future__ import annotations

import json

import pytest
from django.template.loader import render_to_string

from apps.chats.services.chats import chat_create
from apps.gateway.services.complete import completion_prepare
from apps.memories.services.memories import memory_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_embeddings")]

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."
CARRIED = "[Long-term memories]\n- Mira owes Hale eleven crowns.\n\n[Relationships]\n- Mira → Rowan: wary trust"


@pytest.fixture
def mira_owes(user, character):
    chat_create(user=user, title="Harbour", character_ids=[character.pk], character_name="Mira", user_name="Rowan",
                client_key="harbour")  # fmt: skip
    memory_create(user=user, kind="fact", content="Mira owes Hale eleven crowns.", character=character)


def _ask(user, *messages):
    body = {"model": "scripted", "messages": [{"role": "system", "content": SYSTEM}, *messages]}
    return completion_prepare(user=user, body=body, chat_header="harbour").generation


def test_memory_the_prompt_carries_is_not_placed_again_and_the_prompt_page_says_why(user, connection, mira_owes):
    generation = _ask(user, {"role": "system", "content": CARRIED}, {"role": "user", "content": "What do you owe?"})
    sent = json.dumps(generation.prompt)
    assert sent.count("[Long-term memories]") == 1 and sent.count("eleven crowns") == 1
    assert generation.prompt_info["carried"] is True and generation.prompt_info["slots"] == []
    page = render_to_string("generation/prompt.html", {"chat": generation.chat, "index": 2, "generation": generation})
    assert "carried Lorekeeper's memory already" in page


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "system", "content": "[Long-term memories]\n- A note of the card's own."}],
        [{"role": "user", "content": CARRIED}],  # a person pasting it is writing, not the extension
    ],
)
def test_one_head_or_heads_in_the_history_are_not_taken_for_carried_memory(user, connection, mira_owes, messages):
    generation = _ask(user, *messages, {"role": "user", "content": "What do you owe?"})
    assert "carried" not in generation.prompt_info
    assert "Mira owes Hale eleven crowns." in json.dumps(
        [generation.prompt[n] for n in generation.prompt_info["added"]]
    )
