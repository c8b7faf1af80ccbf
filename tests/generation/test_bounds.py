"""Every stream has bounds (the reply's length in tokens, the message limit in characters, the total time, the time
between tokens), a person and a process stream only so many replies at once, and a swipe or a continuation lands
only on the message it was asked for: against the scripted model over real HTTP, through the API."""

import json
from datetime import timedelta

import httpx
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.models import Generation
from apps.generation.services.bounds import MAX_MESSAGE
from apps.generation.services.stream import open_streams
from apps.llm.tokens import tokenizer_for
from tests.generation.faults import fail_relaying_after
from tests.generation.test_generate_api import STORY, events, generate, last
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

ENDLESS = " ".join(f"wave{n % 10}" for n in range(30_000))  # 180,000 characters as fast as the model can


@pytest.fixture
def story(user, character, scripted):
    """A chat whose last message is the character's (as in test_generate_api.py)."""
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    line = {"name": "Mira", "is_user": False, "mes": "The lantern is lit."}
    return chat_append(chat=chat, messages=[line], integrity=chat.integrity).chat


@pytest.fixture
def bounded(settings):
    """Set some of LOREKEEPER_GENERATION for a test."""

    def set_(**values):
        settings.LOREKEEPER_GENERATION = {**settings.LOREKEEPER_GENERATION, **values}

    return set_


def test_a_reply_past_its_length_in_tokens_stops_there_keeping_what_arrived(api, story, llm, bounded):
    bounded(reply_tokens_margin=1.0)
    llm.reply_tokens = 60
    llm.save(update_fields=["reply_tokens"])
    llm.server.on("Any ships?", Reply(ENDLESS))  # a model that ignores max_tokens
    response = generate(api, story, message="Any ships?")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["state"] == "stopped" and body["reason"] == "length"
    assert body["detail"] == "stopped: the reply reached its length of 60 tokens"
    tokens = tokenizer_for(llm).count(body["text"])
    assert 59 <= tokens <= 61 and ENDLESS.startswith(body["text"])  # its length, give or take a token
    message = last(story)
    assert message.mes == body["text"] and message.extra["lorekeeper"] | {} == {
        "generation": body["generation"], "state": "stopped", "reason": "length",
    }  # fmt: skip


def test_a_reply_stops_at_the_message_limit_in_characters_stored_once(api, story, llm):
    llm.reply_tokens = 10**6
    llm.save(update_fields=["reply_tokens"])
    llm.server.on("Any ships?", Reply(ENDLESS))
    response = generate(api, story, message="Any ships?")
    body = response.json()
    assert response.status_code == 200 and body["state"] == "stopped" and body["reason"] == "characters"
    assert body["detail"] == "stopped: the reply reached 100,000 characters, the most a message holds"
    assert body["text"] == ENDLESS[:MAX_MESSAGE]
    assert last(story).mes == ENDLESS[:MAX_MESSAGE] and last(story).swipes == [ENDLESS[:MAX_MESSAGE]]
    assert Generation.objects.get(uid=body["generation"]).text == ENDLESS[:MAX_MESSAGE]


def test_a_continuation_stops_where_the_message_would_pass_the_limit(api, story, llm):
    llm.reply_tokens = 10**6
    llm.save(update_fields=["reply_tokens"])
    llm.server.on(lambda prompt: True, Reply(ENDLESS))
    body = generate(api, story, mode="continue").json()
    assert body["reason"] == "characters"
    assert len(last(story).mes) <= MAX_MESSAGE and last(story).mes.startswith("The lantern is lit. wave0")


def test_a_reply_past_the_total_time_stops_keeping_what_arrived(api, story, llm, bounded):
    bounded(max_seconds=1.0)
    llm.server.on("Any ships?", Reply(" ".join(["slow"] * 100), tokens_per_second=20))  # 5 s of it
    body = generate(api, story, message="Any ships?").json()
    assert body["state"] == "stopped" and body["reason"] == "time"
    assert body["detail"] == "stopped: the reply took longer than 1 s"
    assert body["text"].startswith("slow") and len(body["text"]) < 500
    assert last(story).mes == body["text"] and last(story).extra["lorekeeper"]["reason"] == "time"


def test_a_model_silent_between_tokens_past_the_idle_time_is_stopped(api, story, llm, bounded):
    bounded(idle_seconds=0.5)
    llm.server.on("Any ships?", Reply("One. Two. Three.", tokens_per_second=0.5))  # a token every 2 s
    body = generate(api, story, message="Any ships?").json()
    assert body["state"] == "stopped" and body["reason"] == "idle" and body["text"] == "One."
    assert body["detail"] == "stopped: the model sent nothing for 0.5 s"
    assert last(story).mes == "One."


def test_the_stream_says_why_a_bound_stopped_it(api, story, llm, bounded):
    bounded(reply_tokens_margin=1.0)
    llm.reply_tokens = 20
    llm.save(update_fields=["reply_tokens"])
    llm.server.on("Any ships?", Reply(ENDLESS))
    response = api.post(f"/api/v1/chats/{story.pk}/generate", {"message": "Any ships?"}, format="json")
    found = events(response)
    name, data = found[-1]
    assert name == "done" and data["state"] == "stopped" and data["reason"] == "length" and data["detail"]
    assert "".join(d["text"] for n, d in found if n == "delta") == data["text"]


def _streaming(user, chat, *, lease_in: float) -> Generation:
    """A generation of the person's streaming elsewhere (another worker), its lease ending `lease_in` s from now."""
    return Generation.objects.create(
        user=user, chat=chat, mode="new", lease_until=timezone.now() + timedelta(seconds=lease_in)
    )


def test_a_person_past_their_streams_at_once_is_told_to_wait(api, user, story, llm, bounded):
    bounded(streams_per_user=2, retry_after=7)
    _streaming(user, story, lease_in=30)
    _streaming(user, story, lease_in=30)
    response = generate(api, story, message="Any ships?")
    assert response.status_code == 429 and response["Retry-After"] == "7"
    assert response.json()["error"] == "too_many_streams"
    assert Chat.objects.get(pk=story.pk).message_count == 1  # the person's message is not half-sent
    assert not llm.server.requests


def test_streams_whose_lease_ran_out_do_not_count(api, user, story, llm, bounded):
    bounded(streams_per_user=2)
    _streaming(user, story, lease_in=30)
    _streaming(user, story, lease_in=-1)  # its process died
    llm.server.on("Any ships?", STORY)
    assert generate(api, story, message="Any ships?").status_code == 200


def test_a_process_at_its_streams_answers_503_with_retry_after(async_client, token, story, llm, bounded):
    """Under ASGI, as served (Django's AsyncClient)."""
    bounded(streams_per_process=3, retry_after=4)
    open_streams.update({-1, -2, -3})  # three streams of other people in this process
    try:
        response = async_to_sync(async_client.post)(
            f"/api/v1/chats/{story.pk}/generate", {"stream": False, "message": "Any ships?"},
            content_type="application/json", headers={"Authorization": f"Bearer {token}"},
        )  # fmt: skip
    finally:
        open_streams.difference_update({-1, -2, -3})
    assert response.status_code == 503 and response["Retry-After"] == "4"
    assert response["Connection"] == "close"  # the next try connects afresh, to a worker with room
    assert response.json()["error"] == "server_busy"
    assert Chat.objects.get(pk=story.pk).message_count == 1


@pytest.mark.django_db(transaction=True)
def test_a_wsgi_server_answers_the_503_too(live_server, token, story, llm, bounded):
    """A WSGI server refuses a `Connection` header from the application (wsgiref's, behind `manage.py runserver`
    and the browser tests, failed the request): the 503 is sent without it."""
    bounded(streams_per_process=3, retry_after=4)
    open_streams.update({-1, -2, -3})
    try:
        response = httpx.post(
            f"{live_server.url}/api/v1/chats/{story.pk}/generate", json={"stream": False, "message": "Any ships?"},
            headers={"Authorization": f"Bearer {token}"}, timeout=30,
        )  # fmt: skip
    finally:
        open_streams.difference_update({-1, -2, -3})
    assert response.status_code == 503 and response.headers["Retry-After"] == "4"
    assert response.json()["error"] == "server_busy"
    assert Chat.objects.get(pk=story.pk).message_count == 1


@pytest.mark.parametrize("mode", ["swipe", "continue"])
def test_a_swipe_or_continue_never_lands_on_a_message_that_replaced_its_own(api, story, llm, mode):
    """The race: the model is slow; meanwhile another device replaces the last reply by a person's message,
    keeping the count. The reply must not land on the person's message."""
    llm.server.on(lambda prompt: True, Reply("The tide turns slowly here tonight.", tokens_per_second=10))
    response = api.post(f"/api/v1/chats/{story.pk}/generate", {"mode": mode}, format="json")
    person = {"name": "Rowan", "is_user": True, "is_system": False, "mes": "Typed on my phone.", "extra": {}}

    def replace_last():
        chat = Chat.objects.get(pk=story.pk)
        answer = api.post(
            f"/api/v1/chats/{story.pk}/patch", {"operations": [{"op": "replace", "path": "/0", "value": person}]},
            format="json", HTTP_IF_MATCH=f'"{chat.integrity}"',
        )  # fmt: skip
        assert answer.status_code == 200, answer.json()

    async def run():
        found = []
        async for part in response.streaming_content:
            found.append(part.decode())
            if len(found) == 2:  # the context, then the first delta: the model is writing
                await sync_to_async(replace_last)()
        return "".join(found)

    raw = async_to_sync(run)()
    blocks = [dict(line.split(": ", 1) for line in block.split("\n")) for block in raw.strip().split("\n\n")]
    name, data = blocks[-1]["event"], json.loads(blocks[-1]["data"])
    assert name == "conflict" and data["state"] == "conflict" and data["text"].startswith("The tide")
    message = Message.objects.get(chat=story, index=0)
    assert (message.mes, message.is_user) == ("Typed on my phone.", True)
    assert message.swipes in (None, ["Typed on my phone."])
    assert Chat.objects.get(pk=story.pk).message_count == 1


def test_a_swipe_on_the_message_unchanged_still_lands(api, story, llm):
    llm.server.on(lambda prompt: True, "None tonight.")
    body = generate(api, story, mode="swipe").json()
    assert body["state"] == "done" and last(story).swipes == ["The lantern is lit.", "None tonight."]


def test_a_fault_of_the_servers_mid_reply_ends_it_failed_keeping_what_arrived(api, story, llm, monkeypatch):
    """Every reply ends in a known state: an error of Lorekeeper's own while relaying (here, injected at the fourth
    piece) stores what had arrived, marked failed, instead of leaving the generation streaming."""
    fail_relaying_after(monkeypatch, 3)
    llm.server.on("Any ships?", Reply("One ship came in late tonight under a torn sail", tokens_per_second=50))
    response = generate(api, story, message="Any ships?")
    body = response.json()
    assert body["state"] == "failed" and "relaying" in body["detail"], body
    generation = Generation.objects.get(uid=body["generation"])
    whole = "One ship came in late tonight under a torn sail"
    assert generation.state == "failed" and generation.text and whole.startswith(generation.text)
    assert len(generation.text) < len(whole)  # what had arrived when the fault came, not the whole reply
    assert last(story).mes == generation.text and last(story).extra["lorekeeper"]["state"] == "failed"
