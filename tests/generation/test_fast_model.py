"""A model that streams as fast as it can, under the production server (gunicorn with one uvicorn worker, so that the
person it streams to and another person share the worker): the other person's requests and streams keep being
answered all along, and the worker is never killed for missing the arbiter's deadline."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import httpx
import psutil
import pytest

from apps.accounts.services import api_token_create
from apps.chats.services.chats import chat_create
from apps.llm.services import connection_create
from tests.chats.factories import CharacterFactory
from tests.generation.flood import read_streams, serve_flood
from tests.llm_server import Reply
from tests.servers import gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ATTACK_SECONDS = 60
STREAMS = 4  # the flooder's streams at once: as many as a person may have
SPAWN = multiprocessing.get_context("spawn")
ANSWER = "Aye, the Gull came in at dawn with her sails torn and her hold full of salt."


@pytest.fixture
def flood():
    """The flooding model, in a process of its own: (its URL, the bytes it sent so far)."""
    port, sent, stop = SPAWN.Value("i", 0), SPAWN.Value("q", 0), SPAWN.Event()
    process = SPAWN.Process(target=serve_flood, args=(port, sent, stop, ATTACK_SECONDS), daemon=True)
    process.start()
    while not port.value:
        assert process.is_alive(), "the flooding model did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port.value}/v1", sent
    stop.set()
    process.join(timeout=10)


def _events(response: httpx.Response) -> list[str]:
    return [line[7:] for line in response.iter_lines() if line.startswith("event: ")]


def _workers(log: Path) -> set[int]:
    master = psutil.Process(int(Path(f"{log}.pid").read_text()))
    return {child.pid for child in master.children()}


def test_a_model_flooding_one_stream_never_stops_the_worker_serving_another_person(
    user, other_user, llm_server, broker, flood, tmp_path
):
    flood_url, flood_sent = flood
    mira = CharacterFactory(user=user, name="Mira")
    mine = [chat_create(user=user, title=f"Flood {n}", character_ids=[mira.pk]) for n in range(STREAMS)]
    connection_create(
        user=user, name="fast", base_url=flood_url, model="m", api_key="sk-" + "x" * 20, reply_tokens=30_000,
        context_window=65_536,
    )  # fmt: skip
    theirs = chat_create(user=other_user, title="Harbour", character_ids=[CharacterFactory(user=other_user).pk])
    connection_create(user=other_user, name="slow", base_url=llm_server.url, model="m", api_key="sk-" + "y" * 20)
    llm_server.on("Any ships?", Reply(ANSWER, tokens_per_second=20))
    tokens = {who: api_token_create(user=who, name="tests")[1] for who in (user, other_user)}
    log = tmp_path / "gunicorn.log"
    failures: list[str] = []
    answered: list[str] = []

    with gunicorn(broker=broker, workers=1, asgi=True, log=log, LOREKEEPER_PROVIDER_PRIVATE_HOSTS="true") as url:
        workers = _workers(log)

        received = SPAWN.Value("q", 0)
        body = {"message": "Go on, forever."}
        attacks = [
            SPAWN.Process(
                target=read_streams, daemon=True,
                args=(url, f"/api/v1/chats/{chat.pk}/generate", tokens[user], body, ATTACK_SECONDS, received),
            )
            for chat in mine
        ]  # fmt: skip
        for attack in attacks:
            attack.start()
        began = time.monotonic()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens[other_user]}"}) as http:
            while time.monotonic() - began < ATTACK_SECONDS + 5:
                at = f"{time.monotonic() - began:.0f} s"
                try:
                    listing = http.get("/api/v1/chats/", timeout=10)
                    if listing.status_code != 200:
                        failures.append(f"{at}: GET answered {listing.status_code}")
                    body = {"message": "Any ships?"}
                    with http.stream("POST", f"/api/v1/chats/{theirs.pk}/generate", json=body, timeout=15) as reply:
                        names = _events(reply)
                    if reply.status_code != 200 or names[-1:] != ["done"]:
                        failures.append(f"{at}: the stream answered {reply.status_code} and ended {names[-1:]}")
                    else:
                        answered.append(at)
                except httpx.HTTPError as exc:
                    failures.append(f"{at}: {type(exc).__name__} {exc}")
                time.sleep(0.5)
        for attack in attacks:
            attack.join(timeout=60)
        assert _workers(log) == workers, "the worker was replaced"

    assert flood_sent.value > 50 * 2**20, "the model did not flood"  # it did stream, and fast
    assert not failures, failures
    assert len(answered) >= 10
    assert "WORKER TIMEOUT" not in log.read_text()
