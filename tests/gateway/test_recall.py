"""A gateway request's recall leaves out the chat's turns the request's history holds: the front end's prompt holds
them, and recalled they would reach the model twice. Turns the front end cut from a long history are recalled."""

from __future__ import annotations

import pytest

from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.gateway.services.complete import completion_prepare
from apps.injection.services.recall import recall_stored
from apps.memories.models import Memory
from apps.memories.services.indexing import chat_index_messages

pytestmark = pytest.mark.django_db

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."
ASK = "Where does Biscuit the lurcher sleep?"
EARLY = "Biscuit the lurcher sleeps under the lighthouse stairs."  # message 3
LATE = "Biscuit the lurcher chased the gulls off the quay."  # message 50


@pytest.fixture(autouse=True)
def text_only(settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"  # the recall ranks by words: no model to reach


@pytest.fixture
def chat(user, character):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], character_name="Mira",
                       user_name="Rowan", client_key="harbour")  # fmt: skip
    texts = {3: EARLY, 50: LATE}
    lines = [{"name": "Rowan" if n % 2 else "Mira", "is_user": bool(n % 2),
              "mes": texts.get(n, f"Line {n} of the story.")} for n in range(61)]  # fmt: skip
    chat = chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat
    chat_index_messages(chat_id=chat.pk)
    return chat


def history(chat, start: int = 0) -> list[dict[str, str]]:
    rows = Message.objects.filter(chat=chat, index__gte=start).order_by("index").values_list("is_user", "mes")
    return [{"role": "user" if is_user else "assistant", "content": mes} for is_user, mes in rows]


def recalled(user, chat, messages) -> list[str]:
    """The texts of the chat's turns the request's recall brought."""
    body = {"model": "scripted", "messages": [{"role": "system", "content": SYSTEM}, *messages]}
    summary = completion_prepare(user=user, body=body, chat_header="harbour").generation.prompt_info["recall"]
    if summary["source"] == "none":
        return []
    assert summary["source"] == "new" and summary["stored"], summary  # kept on the person's turn
    record = recall_stored(Message.objects.get(chat=chat, index=summary["message_index"]))
    ids = [memory["id"] for memory in record["memories"]]
    return list(Memory.objects.filter(pk__in=ids, kind="message").values_list("content", flat=True))


def test_a_whole_history_sent_leaves_every_turn_out_of_the_recall(user, connection, chat):
    assert recalled(user, chat, [*history(chat), {"role": "user", "content": ASK}]) == []


def test_turns_cut_from_the_front_ends_history_are_recalled_and_those_it_sent_are_not(user, connection, chat):
    turns = recalled(user, chat, [*history(chat, start=40), {"role": "user", "content": ASK}])
    assert any(EARLY in text for text in turns) and not any(LATE in text for text in turns)
