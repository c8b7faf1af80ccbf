"""The prompt kept with a gateway reply: a front end sends the whole history with every turn, so the chat's messages
it repeats word for word are kept as runs of the chat's messages, not copied with each reply; the model is still
sent every message, and the Prompt page shows the runs and the memory added."""

from __future__ import annotations

import pytest

from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.gateway.services.complete import completion_prepare
from apps.generation.models import Generation
from apps.generation.selectors import prompt_messages
from apps.memories.services.memories import memory_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_embeddings")]

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."


@pytest.fixture
def chat(user, character):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], character_name="Mira",
                       user_name="Rowan", client_key="harbour")  # fmt: skip
    lines = [{"name": "Rowan" if n % 2 else "Mira", "is_user": bool(n % 2), "mes": f"Line {n} of the story."}
             for n in range(41)]  # Mira's #0 to Mira's #40  # fmt: skip
    return chat_append(chat=chat, messages=lines, integrity=chat.integrity).chat


def history(chat) -> list[dict[str, str]]:
    rows = Message.objects.filter(chat=chat).order_by("index").values_list("is_user", "mes")
    return [{"role": "user" if is_user else "assistant", "content": mes} for is_user, mes in rows]


def ask(user, chat, messages) -> Generation:
    body = {"model": "scripted", "messages": [{"role": "system", "content": SYSTEM}, *messages]}
    return completion_prepare(user=user, body=body, chat_header="harbour").generation


def test_the_chats_messages_are_kept_as_a_run_and_the_model_is_sent_them_all(user, character, connection, chat):
    memory_create(user=user, kind="fact", content="Mira owes Hale eleven crowns.", character=character)
    sent = [*history(chat), {"role": "user", "content": "What do you owe?"}]
    generation = ask(user, chat, sent)
    assert [m["content"] for m in generation.prompt if m["role"] != "system"][-42:] == [m["content"] for m in sent]
    kept = Generation.objects.get(pk=generation.pk).prompt
    runs = [m for m in kept if m["role"] == "chat"]
    assert runs == [{"role": "chat", "from": 0, "to": 41, "messages": 42}]  # the person's turn (#41) included
    assert kept[0] == {"role": "system", "content": SYSTEM}
    added = [kept[n]["content"] for n in generation.prompt_info["added"]]
    assert any("Mira owes Hale eleven crowns." in text for text in added)
    assert len(str(kept)) < 2000  # not the 42 messages again


def test_a_message_sent_unlike_the_chats_text_is_kept_as_sent_and_splits_the_run(user, connection, chat):
    sent = history(chat)
    sent[11] = {"role": "user", "content": "  Line 11   of the story. "}  # the same words: no edit, other spacing
    sent.append({"role": "user", "content": "And then?"})
    kept = Generation.objects.get(pk=ask(user, chat, sent).pk).prompt
    assert [m for m in kept if m["role"] == "chat"] == [
        {"role": "chat", "from": 0, "to": 10, "messages": 11},
        {"role": "chat", "from": 12, "to": 41, "messages": 30},
    ]
    assert {"role": "user", "content": "  Line 11   of the story. "} in kept
    assert Message.objects.get(chat=chat, index=11).mes == "Line 11 of the story."  # not an edit


def test_an_edited_message_is_held_word_for_word_after_the_edit(user, connection, chat):
    sent = history(chat)
    sent[5] = {"role": "user", "content": "Line 5, said otherwise."}
    sent.append({"role": "user", "content": "And then?"})
    kept = Generation.objects.get(pk=ask(user, chat, sent).pk).prompt
    assert [m for m in kept if m["role"] == "chat"] == [{"role": "chat", "from": 0, "to": 41, "messages": 42}]
    assert Message.objects.get(chat=chat, index=5).mes == "Line 5, said otherwise."


def test_a_regenerate_keeps_the_history_without_the_reply_redone(user, connection, chat):
    sent = history(chat)[:-1]  # the chat without its last reply: a swipe of #40
    generation = ask(user, chat, sent)
    assert generation.mode == Generation.Mode.SWIPE
    kept = Generation.objects.get(pk=generation.pk).prompt
    assert [m for m in kept if m["role"] == "chat"] == [{"role": "chat", "from": 0, "to": 39, "messages": 40}]


def test_the_prompt_page_shows_the_runs_and_the_memory_added(user, character, connection, chat, client):
    memory_create(user=user, kind="fact", content="Mira owes Hale eleven crowns.", character=character)
    generation = ask(user, chat, [*history(chat), {"role": "user", "content": "What do you owe?"}])
    generation.state, generation.message_index = Generation.State.DONE, 42
    generation.save(update_fields=["state", "message_index"])
    Message.objects.filter(chat=chat, index=41).update(
        extra={"lorekeeper": {"generation": str(generation.uid)}}
    )  # the reply is not stored here: the person's turn stands for it
    client.force_login(user)
    page = client.get(f"/chats/{chat.pk}/messages/41/prompt/").content.decode()
    assert "#0 to #41: 42 messages of this chat" in page
    assert "Mira owes Hale eleven crowns." in page and page.count(" · added") == len(generation.prompt_info["added"])


def test_the_prompt_api_gives_every_message_the_model_was_sent(user, character, connection, chat, client):
    memory_create(user=user, kind="fact", content="Mira owes Hale eleven crowns.", character=character)
    sent = [*history(chat), {"role": "user", "content": "What do you owe?"}]
    generation = ask(user, chat, sent)
    full = generation.prompt  # as the model was sent it
    generation.state, generation.message_index = Generation.State.DONE, 42
    generation.save(update_fields=["state", "message_index"])
    Message.objects.filter(chat=chat, index=41).update(extra={"lorekeeper": {"generation": str(generation.uid)}})
    client.force_login(user)
    answer = client.get(f"/api/v1/chats/{chat.pk}/messages/41/prompt")
    assert answer.status_code == 200
    assert answer.json()["prompt"] == full


def test_a_greeting_kept_past_a_cut_is_kept_as_a_run_of_its_own(user, connection, chat):
    """The front end sends the greeting, then only the newest messages: the kept prompt's runs skip what it cut, and
    read back, they are what the model was sent."""
    sent = [history(chat)[0], *history(chat)[30:], {"role": "user", "content": "And then?"}]
    generation = ask(user, chat, sent)
    assert generation.mode == Generation.Mode.NEW and generation.chat_id == chat.pk
    kept = Generation.objects.get(pk=generation.pk)
    assert [m for m in kept.prompt if m["role"] == "chat"] == [
        {"role": "chat", "from": 0, "to": 0, "messages": 1},
        {"role": "chat", "from": 30, "to": 41, "messages": 12},
    ]
    assert prompt_messages(generation=kept) == generation.prompt  # as the model was sent it
    assert Message.objects.filter(chat=chat).count() == 42  # the 29 messages it cut are kept
