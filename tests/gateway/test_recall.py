"""A gateway request's recall leaves out the chat's turns the request's history holds: the front end's prompt holds
them, and recalled they would reach the model twice. Turns the front end cut from a long history, or hid, are
recalled. (The web chat's rule, the last `recent_messages` turns, 30, would leave out #35 and keep #3.)"""

from __future__ import annotations

import pytest

from apps.accounts.services import settings_document_get
from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.gateway.services.complete import completion_prepare
from apps.injection.services.recall import recall_stored
from apps.injection.services.settings import injection_settings_save
from apps.memories.models import Memory
from apps.memories.services.indexing import chat_index_messages
from apps.memories.services.memories import memory_create

pytestmark = pytest.mark.django_db

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."
ASK = "Where does Biscuit the lurcher sleep?"
OLD = "Biscuit the lurcher sleeps in the keeper's boat."  # message 3
EARLY = "Biscuit the lurcher sleeps under the lighthouse stairs."  # message 35
LATE = "Biscuit the lurcher chased the gulls off the quay."  # message 50
FACT = "Biscuit the lurcher is the lighthouse keeper's dog."


@pytest.fixture(autouse=True)
def text_only(settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"  # the recall ranks by words: no model to reach


@pytest.fixture
def chat(user, character):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], character_name="Mira",
                       user_name="Rowan", client_key="harbour")  # fmt: skip
    texts = {3: OLD, 35: EARLY, 50: LATE}
    lines = [{"name": "Rowan" if n % 2 else "Mira", "is_user": bool(n % 2),
              "mes": texts.get(n, f"Line {n} of the story.")} for n in range(61)]  # fmt: skip
    chat = chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat
    chat_index_messages(chat_id=chat.pk)
    return chat


def history(chat, start: int = 0) -> list[dict[str, str]]:
    """The chat from message `start` on as a front end sends it: without the messages hidden there."""
    rows = Message.objects.filter(chat=chat, index__gte=start, is_system=False).order_by("index")
    rows = rows.values_list("is_user", "mes")
    return [{"role": "user" if is_user else "assistant", "content": mes} for is_user, mes in rows]


def recalled(user, chat, messages) -> list[str]:
    """The texts of the memories the request's recall brought, chat turns and others."""
    body = {"model": "scripted", "messages": [{"role": "system", "content": SYSTEM}, *messages]}
    summary = completion_prepare(user=user, body=body, chat_header="harbour").generation.prompt_info["recall"]
    assert summary["source"] == "new" and summary["stored"], summary  # kept on the person's turn
    record = recall_stored(Message.objects.get(chat=chat, index=summary["message_index"]))
    ids = [memory["id"] for memory in record["memories"]]
    return list(Memory.objects.filter(pk__in=ids).values_list("content", flat=True))


def said(texts: list[str], text: str) -> bool:
    return any(text in found for found in texts)


def test_a_whole_history_sent_leaves_every_turn_out_of_the_recall(user, character, connection, chat):
    # A minor fact among more than the long-term slot holds: only the turn's recall brings it.
    injection_settings_save(
        user=user, values={"budgets": {"long": 60}}, integrity=settings_document_get(user=user).integrity
    )
    for name in ("Corvin", "Tessa", "Hale", "Brin"):
        memory_create(
            user=user, kind="fact", content=f"{name} trades salt for copper.", character=character, importance=3
        )
    memory_create(user=user, kind="fact", content=FACT, character=character, importance=1)
    texts = recalled(user, chat, [*history(chat), {"role": "user", "content": ASK}])
    assert said(texts, FACT) and not any(said(texts, turn) for turn in (OLD, EARLY, LATE))


def test_turns_cut_from_the_front_ends_history_are_recalled_and_those_it_sent_are_not(user, connection, chat):
    texts = recalled(user, chat, [*history(chat, start=40), {"role": "user", "content": ASK}])
    assert said(texts, EARLY) and not said(texts, LATE)


def test_a_hidden_turn_the_front_end_does_not_send_is_recalled(user, connection, chat):
    """A person hides old turns to leave them to memory: the history sent has a gap there, and what is before it
    is recallable."""
    Message.objects.filter(chat=chat, index__in=range(30, 40)).update(is_system=True)
    texts = recalled(user, chat, [*history(chat), {"role": "user", "content": ASK}])
    assert said(texts, EARLY) and not said(texts, LATE)
