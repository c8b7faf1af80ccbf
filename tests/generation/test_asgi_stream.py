"""A reply streamed by the production server (gunicorn with uvicorn workers, ASGI) over real HTTP: a stream holds
no worker while the model is slow, and Stop (the client closing the request) keeps what arrived, marked stopped."""

import json
import time

import httpx
import pytest

from apps.accounts.services import api_token_create
from apps.chats.models import Message
from apps.chats.services.chats import chat_create
from apps.generation.models import Generation
from apps.llm.services import connection_create
from tests.llm_server import Reply
from tests.servers import gunicorn

pytestmark = pytest.mark.django_db(transaction=True)
SLOW = " ".join(f"word{i}" for i in range(60))


@pytest.fixture
def served(user, character, llm_server, broker):
    connection_create(user=user, name="slow", base_url=llm_server.url, model="slow-model", api_key="sk-x" * 6)
    llm_server.on("Tell me", Reply(SLOW, tokens_per_second=20))
    chat = chat_create(user=user, title="Slow", character_ids=[character.pk], user_name="Rowan")
    token = api_token_create(user=user, name="asgi")[1]
    with gunicorn(broker=broker, workers=1, asgi=True, LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:
        yield url, token, chat


def lines(response):
    name = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            yield name, json.loads(line[6:])


def test_one_worker_answers_other_requests_while_a_reply_streams_and_stop_keeps_what_arrived(served):
    url, token, chat = served
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        with client.stream("POST", f"/api/v1/chats/{chat.pk}/generate", json={"message": "Tell me a story"}) as stream:
            events = lines(stream)
            assert next(events)[0] == "context"
            received = []
            for name, data in events:
                assert name == "delta", data
                received.append(data["text"])
                if len(received) == 3:
                    # The only worker is streaming: it still answers another request meanwhile.
                    other = client.get("/api/v1/chats/")
                    assert other.status_code == 200 and other.json()["results"][0]["id"] == chat.pk
                if len(received) == 6:
                    break  # Stop: the request is closed with the reply half written
    deadline = time.monotonic() + 15
    generation = Generation.objects.get(chat=chat)
    while generation.state == Generation.State.STREAMING and time.monotonic() < deadline:
        time.sleep(0.1)
        generation.refresh_from_db()
    assert generation.state == Generation.State.STOPPED
    stored = Message.objects.get(chat=chat, index=generation.message_index)
    assert stored.mes.startswith("".join(received)) and stored.mes != SLOW
    assert stored.extra["lorekeeper"]["state"] == "stopped"
