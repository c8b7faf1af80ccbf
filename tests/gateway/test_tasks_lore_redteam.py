"""Red team of the gateway's front-end tasks (services/request.py `front_end_task`, match.py's TASK_KEY, sync.py's
plain Synced, complete.py's `_composer`) and of the World Info it places in a front end's prompt
(apps/generation/services/prompt.py `composing_lore`, `memory_placed`; lore_sent.py `lore_unsent`), attacked as a
hostile or unlucky person would: another person's chats and books, retries, races, streams, hidden messages,
whitespace, macros, enormous entries and regex keys that backtrack. Each test says what a demanding person
expects."""

from __future__ import annotations

import json
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection as db_connection
from django.db import connections

from apps.accounts.services import api_token_create
from apps.chats.models import Character, Chat, Message
from apps.chats.services.chats import chat_create
from apps.gateway.services.complete import completion_prepare
from apps.gateway.services.match import TASK_KEY
from apps.generation.models import Generation
from apps.generation.services.lease import _LOCK_CLASS
from apps.llm.services import connection_create
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import lorebook_import
from apps.memories.services.memories import memory_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_embeddings")]

SYSTEM = {"role": "system", "content": "You are Mira, a harbour clerk with a sharp eye."}
ASK = {"role": "user", "content": "Any ships in tonight, Mira?"}
REPLY = "One ship, the Gull, with a torn sail."
TITLED = '{ "title": "Harbour Night" }'
MEMORY = "Mira owes Hale eleven crowns."
TITLE = """### Task:
Generate a concise title summarizing the chat history.
### Output:
JSON format: { "title": "your concise title here" }
### Chat History:
<chat_history>
USER: Any ships in tonight, Mira?
ASSISTANT: One ship, the Gull, with a torn sail.
</chat_history>"""
TASK = {"role": "user", "content": TITLE}


def post(client, token, messages, *, header="", key="", model="scripted", **body):
    headers = {"Authorization": f"Bearer {token}"}
    headers |= {"X-Lorekeeper-Chat": header} if header else {}
    headers |= {"Idempotency-Key": key} if key else {}
    return client.post(
        "/v1/chat/completions", {"model": model, "messages": messages, **body}, content_type="application/json",
        headers=headers,
    )  # fmt: skip


def ask(client, token, messages, **kwargs) -> str:
    response = post(client, token, messages, **kwargs)
    assert response.status_code == 200, response.content[:300]
    return response.json()["choices"][0]["message"]["content"]


def read_stream(response) -> str:
    async def read():
        return b"".join([part async for part in response.streaming_content])

    return async_to_sync(read)().decode()


def everything() -> dict:
    """What the database holds of every person's chats, messages and generations: compared before and after a
    request that must write nothing."""
    chats = list(
        Chat.objects.order_by("pk").values_list(
            "pk", "user_id", "client_key", "title", "message_count", "integrity", "chat_metadata", "updated_at"
        )
    )
    messages = list(Message.objects.order_by("chat_id", "index").values_list("chat_id", "index", "mes", "is_system"))
    generations = list(Generation.objects.order_by("pk").values_list("pk", "chat_id", "user_id", "mode"))
    return {"chats": chats, "messages": messages, "generations": generations}


# --- A front end's tasks: whose chat they reach -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["header", "body"])
def test_a_task_naming_another_persons_chat_is_a_404_and_writes_nothing(client, token, llm, other_user, theirs, how):
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK])
    (chat,) = Chat.objects.all()
    bob = api_token_create(user=other_user, name="bob")[1]
    before, asked = everything(), len(llm.server.requests)
    if how == "header":
        response = post(client, bob, [TASK], header=str(chat.pk), model="bob's")
    else:
        response = post(client, bob, [TASK], model="bob's", lorekeeper_chat=chat.pk)
    assert response.status_code == 404, response.content[:300]
    assert everything() == before and len(llm.server.requests) == asked


def test_a_persons_task_never_reaches_another_persons_chats_or_waiting_task_chat(
    client, token, llm, user, other_user, theirs
):
    """Alice has a chat named `owui-1` and Bob has none: Bob's task naming `owui-1` is answered in a chat of his
    own, and his first conversation then is that chat; Alice's keeps what it held, and none of her words reach the
    model with his."""
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK], header="owui-1")
    memory_create(user=user, kind="fact", content=MEMORY, character=Character.objects.get(user=user))
    alices = everything()
    bob = api_token_create(user=other_user, name="bob")[1]
    bobs_title = TITLE.replace("Any ships in tonight, Mira?", "Is the ferry late?")
    ask(client, bob, [{"role": "user", "content": bobs_title}], header="owui-1", model="bob's")
    sent = json.dumps(llm.server.requests[-1]["body"])
    assert MEMORY not in sent and "Any ships in tonight" not in sent
    (made,) = Chat.objects.filter(user=other_user)
    assert made.client_key == TASK_KEY and made.messages.count() == 0
    assert Generation.objects.get(user=other_user).chat_id == made.pk
    alice_chat = Chat.objects.get(user=user)
    assert everything()["chats"][0] == alices["chats"][0] and alice_chat.messages.count() == 2
    # Alice's next new chat is a chat of her own, never Bob's waiting one.
    ask(client, token, [SYSTEM, {"role": "user", "content": "A room for the night?"}], header="owui-2")
    assert (
        Chat.objects.get(pk=made.pk).user_id == other_user.pk and Chat.objects.get(pk=made.pk).client_key == TASK_KEY
    )
    # Bob's first conversation adopts his own.
    ask(client, bob, [SYSTEM, {"role": "user", "content": "Is the ferry late?"}], header="owui-1", model="bob's")
    (bobs,) = Chat.objects.filter(user=other_user)
    assert bobs.pk == made.pk and bobs.client_key == "owui-1" and bobs.messages.count() == 2
    assert Chat.objects.get(user=user, client_key="owui-1").messages.count() == 2


def test_a_task_retried_with_its_idempotency_key_is_answered_once(client, token, llm, user):
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK])
    llm.server.on("### Task:", TITLED)
    before = everything()
    asked = len(llm.server.requests)
    assert ask(client, token, [TASK], key="title-1") == TITLED
    assert ask(client, token, [TASK], key="title-1") == TITLED
    assert len(llm.server.requests) == asked + 1
    assert Generation.objects.filter(mode=Generation.Mode.IMPERSONATE).count() == 1
    after = everything()
    assert after["chats"] == before["chats"] and after["messages"] == before["messages"]
    # The key sent again with a real turn is refused, naming the header, and writes nothing.
    response = post(client, token, [SYSTEM, ASK, {"role": "assistant", "content": REPLY}, ASK], key="title-1")
    assert response.status_code == 422 and "Idempotency-Key" in response.content.decode()
    assert everything() == after


def test_a_streamed_task_is_answered_and_stored_nowhere(client, token, llm, user):
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK])
    llm.server.on("### Task:", TITLED)
    before = everything()
    response = post(client, token, [SYSTEM, TASK], stream=True)
    assert response.status_code == 200
    body = read_stream(response)
    said = "".join(
        json.loads(line[6:])["choices"][0]["delta"].get("content", "")
        for line in body.splitlines()
        if line.startswith("data: {") and json.loads(line[6:]).get("choices")
    )
    assert said == TITLED and body.rstrip().endswith("data: [DONE]")
    assert llm.server.requests[-1]["body"]["messages"] == [SYSTEM, TASK]  # as it came, its system prompt too
    after = everything()
    assert after["chats"] == before["chats"] and after["messages"] == before["messages"]


def test_a_task_naming_a_chat_with_hidden_messages_changes_nothing_of_it(client, token, llm, user):
    llm.server.default.content = REPLY
    turns = [SYSTEM, ASK, {"role": "assistant", "content": REPLY}, {"role": "user", "content": "Who sails her?"}]
    ask(client, token, turns, header="owui-h")
    chat = Chat.objects.get(user=user)
    Message.objects.filter(chat=chat, index=1).update(is_system=True)  # hidden from the model (SillyTavern's /hide)
    before = everything()
    llm.server.on("### Task:", TITLED)
    assert ask(client, token, [TASK], header="owui-h") == TITLED
    assert ask(client, token, [TASK], header=str(chat.pk)) == TITLED
    after = everything()
    assert after["chats"] == before["chats"] and after["messages"] == before["messages"]


def test_a_task_after_a_manual_order_group_chat_is_answered(client, token, llm, user):
    """A person's only chat is a group of the web chat where they pick who replies; Open WebUI asks a new chat's
    title before its first reply. The task stores nothing and needs no speaker: it is answered."""
    one = Character.objects.create(user=user, name="Mira")
    two = Character.objects.create(user=user, name="Hale")
    chat_create(user=user, title="Harbour", character_ids=[one.pk, two.pk], reply_order="manual")
    before = everything()
    llm.server.on("### Task:", TITLED)
    response = post(client, token, [TASK])
    assert response.status_code == 200, response.content[:300]
    assert response.json()["choices"][0]["message"]["content"] == TITLED
    after = everything()
    assert after["chats"] == before["chats"] and after["messages"] == before["messages"]


def test_a_turn_in_a_group_where_the_person_picks_is_answered_by_the_next_in_order(client, token, llm, user):
    """The person names their web group chat (Mira and Hale, who replies picked by hand) from a front end, which
    cannot pick: its prompt says who speaks, and the reply is stored under the name natural order gives."""
    one = Character.objects.create(user=user, name="Mira")
    two = Character.objects.create(user=user, name="Hale")
    chat = chat_create(user=user, title="Harbour", character_ids=[one.pk, two.pk], reply_order="manual")
    llm.server.default.content = REPLY
    assert ask(client, token, [SYSTEM, ASK], header=str(chat.pk)) == REPLY
    assert ask(client, token, [SYSTEM, ASK, {"role": "assistant", "content": REPLY}, {"role": "user",
               "content": "And the ferry?"}], header=str(chat.pk)) == REPLY  # fmt: skip
    names = list(chat.messages.order_by("index").values_list("is_user", "name"))
    assert [name for is_user, name in names if not is_user] == ["Mira", "Hale"]


def test_a_task_leaves_the_chat_it_is_about_exactly_as_it_was(client, token, llm, user):
    """Nothing of the chat moves: not its messages, its metadata, its integrity, nor when it was last written (the
    chat list's order, and the chat a later task without a header falls back to)."""
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, ASK], header="owui-1")
    before = everything()
    llm.server.on("### Task:", TITLED)
    ask(client, token, [TASK], header="owui-1")
    ask(client, token, [TASK])
    after = everything()
    assert after["chats"] == before["chats"] and after["messages"] == before["messages"]


# --- Races before the person has any chat (each request prepared in its own thread and transaction) -------------


def _held_until_both_wait(user, bodies: list[tuple[dict, str]]) -> list:
    """Each body prepared in a thread of its own while the person's generation lock (taken by every request after
    it has found and written its chat, before it records its generation) is held here: both requests find their
    chat before either commits. Answers each thread's chat id, or the error it raised."""
    results: list = [None] * len(bodies)

    def run(n: int, body: dict, header: str) -> None:
        try:
            results[n] = completion_prepare(user=user, body=body, chat_header=header).generation.chat_id
        except Exception as error:  # noqa: BLE001 — reported by the test
            results[n] = error
        finally:
            connections.close_all()

    with db_connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [_LOCK_CLASS, user.pk % 2**31])
    threads = [threading.Thread(target=run, args=(n, *pair)) for n, pair in enumerate(bodies)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with db_connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
                if cursor.fetchone()[0] >= len(bodies):
                    break
            time.sleep(0.05)
    finally:
        with db_connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, user.pk % 2**31])
    for thread in threads:
        thread.join(30)
    return results


@pytest.mark.django_db(transaction=True)
def test_two_tasks_at_once_before_any_chat_make_one_chat(user, connection):
    tags = {"role": "user", "content": TITLE.replace("a concise title", "1-3 broad tags")}
    results = _held_until_both_wait(user, [({"model": "scripted", "messages": [TASK]}, ""),
                                           ({"model": "scripted", "messages": [tags]}, "")])  # fmt: skip
    assert not [r for r in results if isinstance(r, Exception)], results
    (chat,) = Chat.objects.filter(user=user)
    assert results == [chat.pk, chat.pk] and chat.client_key == TASK_KEY and chat.messages.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_task_at_once_with_the_persons_first_turn_makes_no_stray_chat(user, connection):
    """Each found no chat: the turn made one while the task made the chat it waits in. The turn now takes that one
    (or the task, coming second, finds the turn's)."""
    results = _held_until_both_wait(user, [({"model": "scripted", "messages": [TASK]}, ""),
                                           ({"model": "scripted", "messages": [SYSTEM, ASK]}, "")])  # fmt: skip
    assert not [r for r in results if isinstance(r, Exception)], results
    assert Chat.objects.filter(user=user).count() == 1, list(
        Chat.objects.filter(user=user).values_list("client_key", "message_count")
    )


# --- World Info in the gateway's prompts ----------------------------------------------------------------------

STORY = "Write Mira's next reply in a fictional chat between Mira and Rowan."
TURNS = [
    {"role": "assistant", "content": "The lantern is lit."},
    {"role": "user", "content": "Is the harbour closed?"},
    {"role": "assistant", "content": "A storm is coming."},
    {"role": "user", "content": "Did the Gull come in?"},
]


def global_book(user, name: str, entries: dict) -> Lorebook:
    book = lorebook_import(user=user, name=name, data={"entries": entries})
    Lorebook.objects.filter(pk=book.pk).update(scope=Lorebook.Scope.GLOBAL)
    return book


def prepared(user, messages, *, system=STORY, header="harbour") -> Generation:
    body = {"model": "scripted", "messages": [{"role": "system", "content": system}, *messages]}
    return completion_prepare(user=user, body=body, chat_header=header).generation


def contents(generation: Generation) -> list[str]:
    return [line["content"] for line in generation.prompt]


def test_another_persons_lorebook_never_reaches_a_persons_prompt(user, other_user, connection):
    """Alice's book is global to her; Bob's chat links a book by the same name (as a SillyTavern chat file may):
    Bob's prompt holds none of it, and his Prompt page says the link found no book of his."""
    secret = "Alice hides the crowns under the third plank."
    global_book(user, "Secrets", {"0": {"uid": 0, "constant": True, "content": secret, "position": 0}})
    assert secret in contents(prepared(user, TURNS))  # hers
    connection_create(user=other_user, name="scripted", base_url="http://127.0.0.1:9/v1", model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True)  # fmt: skip
    first = prepared(other_user, TURNS, header="bobs")
    Generation.objects.filter(pk=first.pk).update(state=Generation.State.DONE)
    Chat.objects.filter(pk=first.chat_id).update(chat_metadata={"world_info": "Secrets"})
    generation = prepared(other_user, [*TURNS, {"role": "assistant", "content": "No."}, TURNS[-1]], header="bobs")
    assert not any("crowns" in text for text in contents(generation))
    assert "which you have not imported" in " ".join(generation.prompt_info["lorebook"]["problems"])


def test_a_task_gets_no_world_info_even_when_its_chat_history_holds_a_key(client, token, llm, user):
    """The title task's chat history names the Gull, and the chat's book has a sticky entry for it: the task's
    prompt is sent as it came, and the sticky effect is not started by it."""
    global_book(user, "Harbour", {"0": {"uid": 0, "key": ["gull"], "content": "The Gull is Hale's ship.",
                                        "position": 0, "sticky": 3}})  # fmt: skip
    llm.server.default.content = REPLY
    ask(client, token, [SYSTEM, {"role": "user", "content": "Any news tonight?"}], header="owui-1")
    before = everything()
    ask(client, token, [SYSTEM, TASK], header="owui-1")
    assert llm.server.requests[-1]["body"]["messages"] == [SYSTEM, TASK]
    after = everything()
    assert after["chats"] == before["chats"]  # its metadata too: no timedWorldInfo started by the task


def test_an_entry_with_macros_the_front_end_sent_resolved_is_not_given_twice(user, connection):
    global_book(user, "Harbour", {"0": {"uid": 0, "key": ["gull"], "content": "{{char}} keeps the Gull's ledger.",
                                        "position": 0}})  # fmt: skip
    generation = prepared(user, TURNS, system=f"{STORY}\n\nMira keeps the Gull's ledger.")
    assert sum(text.count("keeps the Gull's ledger") for text in contents(generation)) == 1
    assert not any("{{" in text for text in contents(generation))


def test_entries_with_macros_on_a_chat_whose_character_is_unnamed_reach_the_model_resolved(user, connection):
    global_book(user, "Harbour", {"0": {"uid": 0, "constant": True, "content": "{{char}} guards {{user}}'s ledger.",
                                        "position": 4, "depth": 0, "role": 0}})  # fmt: skip
    generation = prepared(user, TURNS, system="Answer briefly.")
    text = "\n".join(contents(generation))
    assert "guards" in text and "{{" not in text and "}}" not in text


def test_a_key_said_only_in_a_hidden_message_activates_nothing(user, connection):
    global_book(user, "Harbour", {"0": {"uid": 0, "key": ["kraken"], "content": "Nobody has seen the kraken.",
                                        "position": 0, "scanDepth": 10}})  # fmt: skip
    history = [*TURNS[:3], {"role": "user", "content": "The kraken took the Gull!"}]
    first = prepared(user, history)
    Generation.objects.filter(pk=first.pk).update(state=Generation.State.DONE)
    assert "Nobody has seen the kraken." in contents(first)
    chat = Chat.objects.get(pk=first.chat_id)
    Message.objects.filter(chat=chat, index=3).update(is_system=True)  # hidden from the model, as SillyTavern hides
    generation = prepared(user, [*TURNS[:3], {"role": "user", "content": "Any ships?"}])
    assert not any("Nobody has seen" in text for text in contents(generation))
    assert list(chat.messages.filter(mes__contains="kraken").values_list("is_system", flat=True)) == [True]


def test_an_entry_the_front_end_sent_with_other_spacing_is_not_given_twice(user, connection):
    """The front end's prompt holds the entry's words with other whitespace (its blank line collapsed, a double space
    made single). Messages spaced otherwise are the same message to the gateway; an entry spaced otherwise was
    given again."""
    entry = "The Gull is Hale's ship.\n\nShe sails at dawn,  with the tide."
    global_book(user, "Harbour", {"0": {"uid": 0, "key": ["gull"], "content": entry, "position": 0}})
    generation = prepared(
        user, TURNS, system=f"{STORY}\n\nThe Gull is Hale's ship.\nShe sails at dawn, with the tide."
    )
    assert sum(text.count("She sails at dawn") for text in contents(generation)) == 1


def test_an_enormous_entry_is_left_out_within_the_connections_context(user):
    connection_create(user=user, name="scripted", base_url="http://127.0.0.1:9/v1", model="scripted-model",
                      api_key="sk-test-1234567890abcd", is_default=True, context_window=4096)  # fmt: skip
    huge = "The Gull's cargo manifest lists barrels of salt. " * 3_900  # near the 200,000 characters an entry holds
    global_book(user, "Harbour", {"0": {"uid": 0, "constant": True, "content": huge, "position": 0},
                                  "1": {"uid": 1, "key": ["storm"], "content": "Storms come from the west.",
                                        "position": 4, "depth": 1, "role": 0}})  # fmt: skip
    started = time.perf_counter()
    generation = prepared(user, TURNS)
    assert time.perf_counter() - started < 3
    assert not any("cargo manifest" in text for text in contents(generation))
    assert generation.prompt_info["lorebook"]["overflowed"] is True


def test_regex_keys_that_backtrack_cost_a_request_no_more_than_the_builds_allowance(user, connection):
    """Keys whose regex matches the scanned text at once (its oldest message says TRIGGER) but backtracks
    catastrophically on each newer message alone: each was tested again on every message, to tell where it stood,
    with a fresh allowance each time (8 entries x 19 messages x 0.05 s: 7.6 s). Telling where has a quarter of a
    second of its own, apart from the activation's: every entry is activated, and where it ran out the Prompt page
    says so."""
    key = r"/^(?=[\s\S]*TRIGGER)|(a|aa)+$/"
    global_book(user, "Harbour", {str(n): {"uid": n, "key": [key], "content": f"Entry {n}.", "position": 0,
                                           "scanDepth": 20} for n in range(8)})  # fmt: skip
    history = [{"role": "assistant", "content": "TRIGGER: the lantern is lit."}]
    history += [{"role": "user" if n % 2 else "assistant", "content": "a" * 40 + "!"} for n in range(1, 20)]
    started = time.perf_counter()
    generation = prepared(user, history)
    spent = time.perf_counter() - started
    sent = "\n".join(contents(generation))
    assert all(f"Entry {n}." in sent for n in range(8))
    lore = generation.prompt_info["lorebook"]
    assert lore["regex_ms"] < 700 and not lore["regex_exhausted"]
    assert any("depth" not in entry["why"] and "recursion" not in entry["why"] for entry in lore["entries"])
    assert spent < 2.5, f"{spent:.2f} s"
