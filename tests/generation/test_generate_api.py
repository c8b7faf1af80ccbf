"""POST /api/v1/chats/{id}/generate against the scripted model over real HTTP: the reply stored as SillyTavern
stores one (new, swipe, continue), impersonate drafting only, a failing model keeping what arrived, idempotent
retries, a conflict while the reply was written, and the prompt shown after the fact."""

import json
import time
import uuid

import pytest
from asgiref.sync import async_to_sync

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.services.generate import generation_prepare
from apps.generation.services.stream import (
    BUSY_STREAMS,
    DELTA_WINDOW,
    MAX_WINDOW,
    delta_window,
    generation_events,
    open_streams,
)
from apps.memories.services.memories import memory_create
from tests.generation.faults import fail_relaying_after
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

STORY = "The Gull came in at dawn, her sails torn."


@pytest.fixture
def story(user, character, scripted):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    return chat_append(
        chat=chat,
        messages=[{"name": "Mira", "is_user": False, "mes": "The lantern is lit."}],
        integrity=chat.integrity,
    ).chat


def generate(api, chat, *, key=None, **body):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return api.post(f"/api/v1/chats/{chat.pk}/generate", {"stream": False, **body}, format="json", **headers)


def events(response) -> list[tuple[str, dict]]:
    async def read():
        return b"".join([part async for part in response.streaming_content])

    raw = async_to_sync(read)().decode()
    found = []
    for block in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        found.append((lines["event"], json.loads(lines["data"])))
    return found


def last(chat) -> Message:
    return Message.objects.filter(chat=chat).order_by("-index").first()


def test_a_reply_is_stored_as_sillytavern_stores_one_after_the_persons_message(api, story, llm):
    llm.server.on("Any ships?", STORY)
    response = generate(api, story, message="Any ships?")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["state"] == "done" and body["text"] == STORY and body["index"] == 2
    message = body["message"]
    assert message["mes"] == STORY and message["swipes"] == [STORY] and message["swipe_id"] == 0
    assert message["name"] == "Mira" and message["is_user"] is False
    assert set(message["swipe_info"][0]) == {"send_date", "gen_started", "gen_finished", "extra"}
    assert message["extra"]["api"] == "openai" and message["extra"]["model"] == llm.model
    chat = Chat.objects.get(pk=story.pk)
    assert chat.message_count == 3 and str(chat.integrity) == body["integrity"]
    person = Message.objects.get(chat=chat, index=1)
    assert (person.is_user, person.name, person.mes) == (True, "Rowan", "Any ships?")
    sent = llm.server.requests[-1]["body"]
    assert sent["stream"] is True and sent["messages"][-1] == {"role": "user", "content": "Any ships?"}


def test_the_stream_sends_the_context_then_deltas_then_the_stored_message(api, story, llm):
    llm.server.on("Any ships?", STORY)
    response = api.post(f"/api/v1/chats/{story.pk}/generate", {"message": "Any ships?"}, format="json")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/event-stream")
    found = events(response)
    names = [name for name, _ in found]
    assert names[0] == "context" and names[-1] == "done" and set(names[1:-1]) == {"delta"}
    assert "".join(data["text"] for name, data in found if name == "delta") == STORY
    assert found[-1][1]["message"]["mes"] == STORY
    assert found[-1][1]["integrity"] == str(Chat.objects.get(pk=story.pk).integrity)


def test_a_fast_model_is_sent_on_in_events_a_window_apart_that_lose_nothing(api, story, llm):
    words = " ".join(f"word{n}" for n in range(40))
    llm.server.on("Any ships?", Reply(words, tokens_per_second=200))  # 0.2 s of words, 5 ms apart
    response = api.post(f"/api/v1/chats/{story.pk}/generate", {"message": "Any ships?"}, format="json")

    started = time.monotonic()
    deltas = [data["text"] for name, data in events(response) if name == "delta"]
    took = time.monotonic() - started  # 0.2 s and more on a busy machine

    assert "".join(deltas) == words
    assert 2 <= len(deltas) <= took / DELTA_WINDOW + 2  # not one event a word: one a window, the first at once


def test_the_window_between_events_grows_with_the_streams_open_in_the_worker():
    assert delta_window() == DELTA_WINDOW
    for count, window in [(BUSY_STREAMS, DELTA_WINDOW), (2 * BUSY_STREAMS, 2 * DELTA_WINDOW), (10**4, MAX_WINDOW)]:
        open_streams.update(range(-count, 0))  # stand-ins for the generations of a busy worker
        try:
            assert delta_window() == pytest.approx(window)
        finally:
            open_streams.clear()


def test_a_memory_of_the_character_reaches_the_models_request(api, story, character, llm):
    memory_create(user=story.user, kind="fact", content="Mira owes Hale eleven crowns.", character=character)
    generate(api, story, message="What do you owe?")
    prompt = json.dumps(llm.server.requests[-1]["body"]["messages"])
    assert "Mira owes Hale eleven crowns." in prompt


def test_a_swipe_adds_a_version_of_the_last_reply_and_shows_it(api, story, llm):
    llm.server.on("Any ships?", STORY, times=1)
    generate(api, story, message="Any ships?")
    llm.server.on(lambda prompt: True, "None tonight.")
    body = generate(api, story, mode="swipe").json()
    assert body["index"] == 2 and body["swipe_id"] == 1
    message = last(story)
    assert message.swipes == [STORY, "None tonight."] and message.swipe_id == 1 and message.mes == "None tonight."
    assert len(message.swipe_info) == 2
    # The reply being redone is not in the prompt; the person's message is its end.
    assert llm.server.requests[-1]["body"]["messages"][-1]["content"] == "Any ships?"


def test_continue_adds_to_the_last_reply_and_its_shown_swipe(api, story, llm):
    llm.server.on(lambda prompt: True, " And the wind rose.")
    body = generate(api, story, mode="continue").json()
    message = last(story)
    assert body["index"] == 0 and message.mes == "The lantern is lit. And the wind rose."
    assert message.swipes is None or message.swipes[message.swipe_id or 0] == message.mes
    assert Chat.objects.get(pk=story.pk).message_count == 1


def test_impersonate_drafts_the_persons_message_and_stores_nothing(api, story, llm):
    llm.server.on(lambda prompt: True, "I wave from the pier.")
    before = Chat.objects.get(pk=story.pk)
    body = generate(api, story, mode="impersonate").json()
    assert body["text"] == "I wave from the pier." and body["index"] is None and body["message"] is None
    after = Chat.objects.get(pk=story.pk)
    assert (after.message_count, after.integrity) == (before.message_count, before.integrity)


def test_a_model_failing_mid_reply_keeps_what_arrived_marked_failed(api, story, llm):
    llm.server.on("Any ships?", Reply("One ship came in late tonight", fail_after=2))
    response = generate(api, story, message="Any ships?")
    assert response.status_code == 502
    body = response.json()
    assert body["error"] == "model_failed" and body["state"] == "failed" and body["message"]
    message = last(story)
    assert message.mes and STORY not in message.mes and "One ship came in late tonight".startswith(message.mes.strip())
    assert message.extra["lorekeeper"]["state"] == "failed"


def test_a_fault_of_lorekeepers_own_is_a_500_server_error_not_the_models(api, story, llm, monkeypatch):
    """A reply that failed because Lorekeeper itself failed relaying it (injected at the third piece) is answered
    500 `server_error`, its message saying Lorekeeper failed, what arrived kept; the model's own failure stays 502."""
    fail_relaying_after(monkeypatch, 2)
    llm.server.on("Any ships?", Reply("One ship came in late tonight under a torn sail", tokens_per_second=50))
    response = generate(api, story, message="Any ships?")
    body = response.json()
    assert response.status_code == 500, body
    assert (body["error"], body["state"], body["reason"]) == ("server_error", "failed", "server")
    assert body["detail"].startswith("the server failed while relaying the reply")
    assert body["message"]["mes"] and body["message"]["extra"]["lorekeeper"]["reason"] == "server"
    assert last(story).mes == body["message"]["mes"]

    monkeypatch.undo()  # relaying works again
    llm.server.on("Any ships at all?", Reply(status=401))
    response = generate(api, story, message="Any ships at all?")
    assert response.status_code == 502 and response.json()["error"] == "model_failed"


def test_a_model_refusing_at_once_leaves_the_persons_message_and_no_reply(api, story, llm):
    llm.server.on("Any ships?", Reply(status=401))
    response = generate(api, story, message="Any ships?")
    assert response.status_code == 502 and response.json()["index"] is None
    assert last(story).mes == "Any ships?" and Chat.objects.get(pk=story.pk).message_count == 2
    assert last(story).is_user


def test_a_retry_with_the_same_key_answers_the_first_answer_without_doubling(api, story, llm):
    llm.server.on("Any ships?", STORY)
    first = generate(api, story, key="send-1", message="Any ships?")
    again = generate(api, story, key="send-1", message="Any ships?")
    assert again.status_code == 200 and again.json() == first.json()
    assert Chat.objects.get(pk=story.pk).message_count == 3
    assert len([r for r in llm.server.requests if "Any ships?" in json.dumps(r["body"])]) == 1
    other = generate(api, story, key="send-1", message="Something else")
    assert other.status_code == 422 and other.json()["error"] == "idempotency_key_reused"


def test_a_chat_changed_while_the_reply_was_written_keeps_the_reply_out_of_it(user, story, llm):
    llm.server.on("Any ships?", STORY)
    prepared = generation_prepare(user=user, chat=story, message="Any ships?")
    chat = Chat.objects.get(pk=story.pk)
    chat_append(
        chat=chat, messages=[{"name": "Rowan", "is_user": True, "mes": "From my phone."}], integrity=chat.integrity
    )

    async def run():
        return [event async for event in generation_events(prepared.generation)]

    found = async_to_sync(run)()
    name, data = found[-1].name, found[-1].data
    assert name == "conflict" and data["text"] == STORY and data["index"] is None
    assert last(story).mes == "From my phone."


def test_bad_requests_are_refused_naming_the_field_and_change_nothing(api, story, llm, other_api):
    before = Chat.objects.get(pk=story.pk)
    wrong = generate(api, story, mode="sideways")
    assert wrong.status_code == 400 and "mode" in wrong.json()
    chat_append(chat=before, messages=[{"name": "Rowan", "is_user": True, "mes": "Hi."}], integrity=before.integrity)
    swipe = generate(api, story, mode="swipe")
    assert swipe.status_code == 400 and swipe.json()["extra"]["field"] == "mode"
    stale = api.post(
        f"/api/v1/chats/{story.pk}/generate", {"message": "x", "stream": False}, format="json",
        HTTP_IF_MATCH=f'"{before.integrity}"',
    )  # fmt: skip
    assert stale.status_code == 409
    assert generate(other_api, story, message="x").status_code == 404
    long = generate(api, story, message="x" * 200_000)  # pasted: it says what to do, not "Ensure this field…"
    said = ["A message holds at most 100000 characters: send it in parts."]
    assert long.status_code == 400 and long.json()["message"] == said
    assert Chat.objects.get(pk=story.pk).message_count == 2  # the one append above, nothing else


def test_without_a_model_connection_the_answer_says_how_to_add_one(api, story):
    response = generate(api, story, message="Hello?")
    assert response.status_code == 409 and response.json()["error"] == "no_model"
    assert Chat.objects.get(pk=story.pk).message_count == 1


def test_the_prompt_of_a_reply_is_shown_after_the_fact(api, web, story, llm, other_api):
    llm.server.on("Any ships?", STORY)
    generate(api, story, message="Any ships?")
    shown = api.get(f"/api/v1/chats/{story.pk}/messages/2/prompt").json()
    assert shown["prompt"] == llm.server.requests[-1]["body"]["messages"]
    assert shown["prompt_tokens"] > 0 and shown["tokenizer"]
    assert api.get(f"/api/v1/chats/{story.pk}/messages/0/prompt").status_code == 404  # not generated here
    assert other_api.get(f"/api/v1/chats/{story.pk}/messages/2/prompt").status_code == 404
    page = web.get(f"/chats/{story.pk}/messages/2/prompt/").content.decode()
    assert "Any ships?" in page and "Prompt of message #2" in page
    # A reply written elsewhere (an imported chat keeps its reference to the generation) says why there is none.
    elsewhere_made = {"lorekeeper": {"generation": str(uuid.uuid4())}}
    Message.objects.filter(chat=story, index=2).update(extra=elsewhere_made, swipe_info=[{"extra": elsewhere_made}])
    elsewhere = web.get(f"/chats/{story.pk}/messages/2/prompt/")
    assert elsewhere.status_code == 404 and "No prompt is kept for this message" in elsewhere.content.decode()


def test_an_ollama_connection_streams_the_reply_too(api, user, story, llm_server):
    from apps.llm.services import connection_create

    connection_create(user=user, name="local", api="ollama", base_url=llm_server.ollama_url, model="llama3")
    llm_server.on("Any ships?", STORY)
    response = api.post(f"/api/v1/chats/{story.pk}/generate", {"message": "Any ships?"}, format="json")
    found = events(response)
    assert "".join(data["text"] for name, data in found if name == "delta") == STORY
    assert found[-1][1]["message"]["extra"]["api"] == "ollama"
    request = llm_server.requests[-1]
    assert request["path"] == "/api/chat" and request["body"]["stream"] is True
    assert request["body"]["messages"][-1] == {"role": "user", "content": "Any ships?"}


def test_a_chat_written_here_exports_as_sillytavern_writes_one(api, story, llm):
    llm.server.on("Any ships?", STORY)
    generate(api, story, message="Any ships?")
    exported = b"".join(api.get(f"/api/v1/chats/{story.pk}/export").streaming_content).decode()
    lines = [json.loads(line) for line in exported.splitlines() if line.strip()]
    header, *messages = lines
    assert header["user_name"] == "Rowan" and "chat_metadata" in header
    reply = messages[-1]
    assert reply["mes"] == STORY and reply["swipes"] == [STORY] and reply["swipe_id"] == 0
    assert reply["swipe_info"][0]["gen_started"] and reply["gen_finished"] and reply["extra"]["model"]
    assert messages[-2]["is_user"] is True and messages[-2]["name"] == "Rowan"


def test_a_reply_its_answer_closed_unrelayed_ends_stopped_and_a_relayed_one_is_left_to_its_stream(user, story, llm):
    """generation_left, which a streamed answer calls when closed: a reply no stream of this process relays (its
    client left before the stream reached the model) ends stopped, the model never asked; one being relayed is
    ended by its stream, with what arrived; one that ended is left as it ended."""
    from apps.generation.services.stream import generation_left

    generation = generation_prepare(user=user, chat=story, message="Any ships?").generation
    open_streams.add(generation.pk)
    try:
        generation_left(generation)
        generation.refresh_from_db()
        assert generation.state == "streaming"
    finally:
        open_streams.discard(generation.pk)
    generation_left(generation)
    generation.refresh_from_db()
    assert (generation.state, generation.text, generation.message_index) == ("stopped", "", None)
    assert "the model was not asked" in generation.error
    assert not llm.server.requests
    ended_at = generation.finished_at
    generation_left(generation)
    generation.refresh_from_db()
    assert generation.finished_at == ended_at
