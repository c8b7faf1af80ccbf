"""A front end's own tasks about a chat (services/request.py `front_end_task`): Open WebUI asks the chat's model for a
title, tags and follow-up suggestions after each reply, each as a conversation of one message of its own. Each was
a new chat of its own (three a reply), and with the chat named by a header, a title asked after the first reply read
as the person's message edited into the task and the reply regenerated."""

from __future__ import annotations

import pytest

from apps.chats.models import Chat
from apps.generation.models import Generation
from apps.memories.services.memories import memory_create

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "You are Mira, a harbour clerk with a sharp eye."}
ASK = {"role": "user", "content": "Any ships in tonight, Mira?"}
REPLY = "One ship, the Gull, with a torn sail."
MEMORY = "Mira owes Hale eleven crowns."
# Open WebUI 0.12.4's default title template (its config.py), filled as it fills it: the chat's newest messages.
TITLE = """### Task:
Generate a concise title summarizing the chat history.
### Guidelines:
- Keep it short: 2-4 words is best.
### Output:
JSON format: { "title": "your concise title here" }
### Chat History:
<chat_history>
USER: Any ships in tonight, Mira?
ASSISTANT: One ship, the Gull, with a torn sail.
</chat_history>"""
TAGS = TITLE.replace("Generate a concise title summarizing", "Generate 1-3 broad tags categorizing the main themes of")


def ask(client, token, messages, header: str = ""):
    headers = {"Authorization": f"Bearer {token}"} | ({"X-Lorekeeper-Chat": header} if header else {})
    response = client.post(
        "/v1/chat/completions", {"model": "scripted", "messages": messages}, content_type="application/json",
        headers=headers,
    )  # fmt: skip
    assert response.status_code == 200, response.content[:300]
    return response.json()["choices"][0]["message"]["content"]


def rows(chat: Chat) -> list[tuple[bool, str, list | None]]:
    return list(chat.messages.order_by("index").values_list("is_user", "mes", "swipes"))


@pytest.mark.parametrize("header", ["", "owui-chat-1"], ids=["guessed", "named"])
def test_a_front_ends_title_and_tags_are_answered_and_the_chat_kept_as_it_was(client, token, llm, user, header):
    llm.server.on(lambda prompt: "### Task:" not in prompt, REPLY)
    llm.server.on(lambda prompt: "### Task:" in prompt, '{ "title": "Harbour Night" }')
    assert ask(client, token, [SYSTEM, ASK], header) == REPLY
    (chat,) = Chat.objects.filter(user=user)
    memory_create(user=user, kind="fact", content=MEMORY, character=chat.characters.get())
    before = rows(chat)
    for task in (TITLE, TAGS):
        assert ask(client, token, [{"role": "user", "content": task}], header) == '{ "title": "Harbour Night" }'
    assert Chat.objects.filter(user=user).count() == 1 and rows(chat) == before
    assert llm.server.requests[-1]["body"]["messages"] == [{"role": "user", "content": TAGS}]  # as it came: no memory
    tasks = Generation.objects.filter(chat=chat, mode=Generation.Mode.IMPERSONATE)
    assert tasks.count() == 2 and all(g.state == Generation.State.DONE for g in tasks)
    # The story goes on in the same chat.
    assert ask(client, token, [SYSTEM, ASK, {"role": "assistant", "content": REPLY},
                               {"role": "user", "content": "Who sails her?"}], header) == REPLY  # fmt: skip
    assert MEMORY in str(llm.server.requests[-1]["body"]["messages"])
    assert Chat.objects.filter(user=user).count() == 1 and chat.messages.count() == 4


@pytest.mark.parametrize("header", ["", "owui-chat-new"], ids=["guessed", "named-not-yet-made"])
def test_a_task_goes_to_the_chat_the_person_generated_in_last_and_makes_none(client, token, llm, user, header):
    """Open WebUI asks a new chat's title before its first reply: the key it names is not held yet. The chat is
    made by that reply's request, named after its character."""
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK])
    other = {"role": "user", "content": "A room for the night, please."}
    ask(client, token, [SYSTEM, other], "owui-chat-0")
    older, latest = Chat.objects.filter(user=user).order_by("pk")
    ask(client, token, [{"role": "user", "content": TITLE}], header)
    assert Chat.objects.filter(user=user).count() == 2
    assert Generation.objects.get(mode=Generation.Mode.IMPERSONATE).chat == latest
    assert older.messages.count() == latest.messages.count() == 2
    if header:
        ask(client, token, [SYSTEM, ASK], header)
        made = Chat.objects.get(user=user, client_key=header)
        assert made.character_name == "Mira" and made.messages.count() == 2


@pytest.mark.parametrize(
    "text",
    [
        "### Task:\nRespond to the user query using the provided context.\n<context>…</context>",  # its RAG answer
        "Summarise this for me: ### Task: <chat_history>",  # not at the start
    ],
)
def test_a_persons_own_message_like_a_task_is_their_turn(client, token, llm, user, text):
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, {"role": "user", "content": text}])
    (chat,) = Chat.objects.filter(user=user)
    assert [mes for _, mes, _ in rows(chat)] == [text, REPLY]


def test_a_task_with_more_than_one_message_is_a_conversation(client, token, llm, user):
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK])
    messages = [SYSTEM, ASK, {"role": "assistant", "content": REPLY}, {"role": "user", "content": TITLE}]
    ask(client, token, messages)
    (chat,) = Chat.objects.filter(user=user)
    assert chat.messages.count() == 4  # a person may paste one into their story


@pytest.mark.parametrize("header", ["", "owui-chat-1"], ids=["guessed", "named"])
def test_a_task_before_the_persons_first_chat_is_answered_in_the_chat_that_becomes_it(
    client, token, llm, user, header
):
    """Open WebUI asks a new chat's title before its first reply: for a person with no chat yet, the task is
    answered in a chat made for it, which their first conversation then is (not an empty chat left beside it)."""
    llm.server.default.content = REPLY
    ask(client, token, [{"role": "user", "content": TITLE}], header)
    ask(client, token, [{"role": "user", "content": TAGS}], header)
    (made,) = Chat.objects.filter(user=user)
    assert made.messages.count() == 0
    ask(client, token, [SYSTEM, ASK], header)
    (chat,) = Chat.objects.filter(user=user)
    assert chat.pk == made.pk and chat.character_name == "Mira" and chat.title.startswith("Mira - ")
    assert [c.name for c in chat.characters.all()] == ["Mira"] and chat.messages.count() == 2
    assert chat.client_key == header or chat.client_key.startswith("gateway:") and chat.client_key != "gateway:task"
    ask(client, token, [SYSTEM, ASK, {"role": "assistant", "content": REPLY}, {"role": "user", "content": "And?"}],
        header)  # fmt: skip
    assert Chat.objects.filter(user=user).count() == 1 and chat.messages.count() == 4
