"""World Info in the gateway's prompts (docs/LOREBOOKS.md): the entries the chat activates go into the front end's
own prompt, those before and after the character as one system message after its system prompt, those at a depth
at theirs with their role; an entry the front end's prompt already holds word for word (its own World Info) is not
given twice; sticky is kept in the chat as the web chat keeps it; and the Prompt page lists each entry and why."""

from __future__ import annotations

import pytest

from apps.chats.models import Chat, Message
from apps.gateway.services.complete import completion_prepare
from apps.generation.models import Generation
from apps.llm.services import connection_create
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_import

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_embeddings")]

SYSTEM = "Write Mira's next reply in a fictional chat between Mira and Rowan."
GULL = "The Gull is Hale's ship."
STORMS = "Storms come from the west."
WORLD = {"entries": {
    "0": {"uid": 0, "key": ["gull"], "content": GULL, "comment": "The Gull", "position": 0},
    "1": {"uid": 1, "key": ["storm"], "content": STORMS, "comment": "Storms", "position": 4, "depth": 1, "role": 1,
          "sticky": 2},
    "2": {"uid": 2, "key": ["kraken"], "content": "Nobody has seen the kraken.", "comment": "Kraken"},
}}  # fmt: skip


@pytest.fixture
def book(user):
    connection_create(user=user, name="scripted", base_url="http://127.0.0.1:9/v1", model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True)  # fmt: skip
    book = lorebook_import(user=user, name="Harbour", data=WORLD)
    Lorebook.objects.filter(pk=book.pk).update(scope=Lorebook.Scope.GLOBAL)
    return book


def ask(user, messages, system=SYSTEM) -> Generation:
    body = {"model": "scripted", "messages": [{"role": "system", "content": system}, *messages]}
    return completion_prepare(user=user, body=body, chat_header="harbour").generation


TURNS = [
    {"role": "assistant", "content": "The lantern is lit."},
    {"role": "user", "content": "Is the harbour closed?"},
    {"role": "assistant", "content": "A storm is coming."},
    {"role": "user", "content": "Did the Gull come in?"},
]


def test_the_entries_the_chat_activates_go_into_the_front_ends_prompt(user, book):
    generation = ask(user, TURNS)
    prompt = [(line["role"], line["content"]) for line in generation.prompt]
    assert prompt == [
        ("system", SYSTEM),
        ("system", GULL),
        ("assistant", "The lantern is lit."),
        ("user", "Is the harbour closed?"),
        ("assistant", "A storm is coming."),
        ("user", STORMS),  # at depth 1, as the user
        ("user", "Did the Gull come in?"),
    ]
    kept = Generation.objects.get(pk=generation.pk).prompt  # the chat's own messages kept as runs
    assert [kept[n]["content"] for n in generation.prompt_info["added"]] == [GULL, STORMS]
    shown = generation.prompt_info["lorebook"]["entries"]
    assert sorted((entry["comment"], entry["held"]) for entry in shown) == [("Storms", False), ("The Gull", False)]
    timed = Chat.objects.get(pk=generation.chat_id).chat_metadata["timedWorldInfo"]
    assert [effect["end"] - effect["start"] for effect in timed["sticky"].values()] == [2]  # kept for the next turns


def test_an_entry_the_front_end_already_sent_is_not_given_twice(user, book, client):
    generation = ask(user, TURNS, system=f"{SYSTEM}\n\n{GULL}")  # the front end's own World Info put it in
    contents = [line["content"] for line in generation.prompt]
    assert contents.count(GULL) == 0 and sum(GULL in text for text in contents) == 1
    assert STORMS in contents
    held = {entry["comment"]: entry["held"] for entry in generation.prompt_info["lorebook"]["entries"]}
    assert held == {"The Gull": True, "Storms": False}
    Generation.objects.filter(pk=generation.pk).update(state=Generation.State.DONE, message_index=4)
    Message.objects.filter(chat_id=generation.chat_id, index=3).update(
        extra={"lorekeeper": {"generation": str(generation.uid)}}
    )  # the reply is not stored here: the person's turn stands for it
    client.force_login(user)
    page = client.get(f"/chats/{generation.chat_id}/messages/3/prompt/").content.decode()
    assert "already in the front end's prompt, not added again" in page


def test_the_notes_world_info_is_added_without_the_note_the_front_end_sent(user, book):
    lorebook_import(user=user, name="Notes", data={"entries": {
        "0": {"uid": 0, "constant": True, "content": "TOP: the bell rings twice.", "position": 2}}})  # fmt: skip
    Lorebook.objects.filter(name="Notes").update(scope=Lorebook.Scope.GLOBAL)
    first = ask(user, TURNS)
    Chat.objects.filter(pk=first.chat_id).update(chat_metadata={"note_prompt": "Keep replies short."})
    Generation.objects.filter(pk=first.pk).update(state=Generation.State.DONE)
    sent = [*TURNS[:-1], {"role": "user", "content": "[Keep replies short.]\nDid the Gull come in?"}]
    generation = ask(user, sent)
    contents = [line["content"] for line in generation.prompt]
    assert sum("Keep replies short." in text for text in contents) == 1  # the front end's own, not added again
    assert contents.count("TOP: the bell rings twice.") == 1
