"""PostgreSQL stopped and started again under load, as production runs (gunicorn, threaded workers keeping their
connections): clients get 503 with Retry-After while it is down, never a 500 and never a half-written request;
the service comes back by itself, and the sync client (which waits as told and sends the very same request again,
same Idempotency-Key) ends with every message it was told was stored present exactly once.

Both runs are slow ones (`make test-all`): they stop the embedded server under everything else using it (a `make
run` beside the tests, another test run). The short one has six clients and one restart; the long one more
clients, three restarts, patches and context builds too. A database named by DATABASE_URL is not ours to restart:
they skip."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx
import pytest
from lorekeeper_client.errors import SyncError
from lorekeeper_client.http import SyncClient

from apps.accounts.services import api_token_create
from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from tests.servers import embedded_postgres, gunicorn, restart_postgres

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def postgres():
    server = embedded_postgres()
    if server is None:
        pytest.skip("the database is an external one (DATABASE_URL): not ours to restart")
    return server


class Writer(threading.Thread):
    """One client on a chat of its own: appends a numbered message after another, and with `patches`, corrects an
    earlier message every few appends and asks for the context now and then; records every answer it saw."""

    def __init__(self, base_url: str, token: str, chat_id: int, stop: threading.Event, *, patches: bool) -> None:
        super().__init__(daemon=True)
        self.answers: Counter = Counter()
        self.unavailable_without_retry_after = 0
        http = httpx.Client(base_url=f"{base_url}/api/v1", timeout=30, event_hooks={"response": [self._seen]})
        # Retry-After says 5 s; the test waits less so it stays short (the client caps the wait it is told).
        self.client = SyncClient(base_url, token=token, http=http, retry_after_max=0.5, unavailable_retries=120)
        self.chat_id, self.stop, self.patches = chat_id, stop, patches
        self.acknowledged: list[str] = []
        self.corrected: dict[int, str] = {}
        self.error: BaseException | None = None

    def _seen(self, response: httpx.Response) -> None:
        self.answers[response.status_code] += 1
        if response.status_code == 503 and not response.headers.get("Retry-After"):
            self.unavailable_without_retry_after += 1

    def run(self) -> None:
        chat = self.client.chat(self.chat_id)
        try:
            while not self.stop.is_set():
                text = f"chat {self.chat_id} message {len(self.acknowledged)}"
                chat.append([{"name": "Rowan", "is_user": True, "mes": text}])
                self.acknowledged.append(text)
                if self.patches and len(self.acknowledged) % 5 == 0:
                    index = len(self.acknowledged) - 3
                    corrected = f"chat {self.chat_id} message {index} (corrected)"
                    chat.edit(index, "mes", corrected)
                    chat.flush()
                    self.corrected[index] = corrected
                if self.patches and len(self.acknowledged) % 7 == 0:
                    answer = self.client.request(
                        "POST", f"/chats/{self.chat_id}/context", json={"message": "What happened at the harbour?"}
                    )
                    assert answer.status_code == 200, answer.text
        except (SyncError, AssertionError, httpx.HTTPError) as exc:
            self.error = exc
        finally:
            self.client.http.close()


def run_under_restarts(user, broker, postgres, *, clients: int, restarts: int, down_for: float, patches: bool):
    token = api_token_create(user=user, name="fault test")[1]
    chats = [chat_create(user=user, title=f"Load {n}", user_name="Rowan").pk for n in range(clients)]
    stop = threading.Event()
    with gunicorn(broker=broker, workers=2, threads=max(4, clients // 2)) as base_url:
        writers = [Writer(base_url, token, chat_id, stop, patches=patches) for chat_id in chats]
        for writer in writers:
            writer.start()
        try:
            for _ in range(restarts):
                time.sleep(2)  # load before the outage
                restart_postgres(postgres, down_for=down_for)
            time.sleep(3)  # and after it: the service must be back by itself
            before_end = {writer: len(writer.acknowledged) for writer in writers}
            time.sleep(2)
        finally:
            stop.set()
            for writer in writers:
                writer.join(timeout=120)

    for writer in writers:
        assert not writer.is_alive(), "a client never got its answer"
        assert writer.error is None, f"client of chat {writer.chat_id}: {writer.error!r}"
        answers = dict(writer.answers)
        assert set(answers) <= {200, 201, 503}, answers  # no 500, no other error
        assert writer.unavailable_without_retry_after == 0
        assert len(writer.acknowledged) > before_end[writer], "no write succeeded after the restart"
    assert sum(writer.answers[503] for writer in writers) > 0, "no request met the outage: the test proved nothing"

    for writer in writers:  # every acknowledged write exactly once, in order, and nothing else
        expected = [writer.corrected.get(index, text) for index, text in enumerate(writer.acknowledged)]
        stored = list(Message.objects.filter(chat_id=writer.chat_id).order_by("index").values_list("index", "mes"))
        assert [mes for _, mes in stored] == expected
        assert [index for index, _ in stored] == list(range(len(expected)))
        assert Chat.objects.get(pk=writer.chat_id).message_count == len(expected)
    return writers


def test_postgres_restarted_under_load_answers_503_then_resumes_and_loses_nothing(user, broker, postgres):
    run_under_restarts(user, broker, postgres, clients=6, restarts=1, down_for=2, patches=False)


def test_postgres_restarted_three_times_under_heavier_load_with_patches_and_context(user, broker, postgres):
    writers = run_under_restarts(user, broker, postgres, clients=24, restarts=3, down_for=4, patches=True)
    assert sum(len(writer.corrected) for writer in writers) > 0
