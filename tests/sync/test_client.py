"""The Python client against a real HTTP server (pytest-django's live server)."""

import threading

import httpx
import pytest
from lorekeeper_client.errors import SyncError
from lorekeeper_client.http import SyncClient

from apps.accounts.services import api_token_create
from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from tests.chats.helpers import exported

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_burst_of_edits_goes_out_as_one_patch(live_server, user, token):
    chat = chat_create(user=user, title="Burst")
    client = SyncClient(live_server.url, token=token, debounce=0.3)
    handle = client.chat(chat.pk)
    handle.append([{"name": "Mira", "mes": f"line {i}"} for i in range(3)])
    requests_before = client.stats.requests
    for i in range(3):
        handle.edit(i, "mes", f"edited {i}")
    handle.edit(1, "extra", {"note": "x"})
    handle.flush()
    assert client.stats.requests - requests_before == 1
    assert [m["mes"] for m in exported(chat)[1:]] == ["edited 0", "edited 1", "edited 2"]
    assert exported(chat)[2]["extra"] == {"note": "x"}


def test_the_debounce_window_sends_by_itself(live_server, user, token):
    chat = chat_create(user=user, title="Timer")
    client = SyncClient(live_server.url, token=token, debounce=0.1)
    handle = client.chat(chat.pk)
    handle.append([{"name": "Mira", "mes": "a"}])
    handle.edit(0, "mes", "b")
    deadline = threading.Event()
    for _ in range(300):  # 0.1 s after the last write, on a machine that may be busy with much else: up to 30 s
        if exported(chat)[1]["mes"] == "b":
            break
        deadline.wait(0.1)
    assert exported(chat)[1]["mes"] == "b"
    # The edit is seen once committed, before the server has answered (what its commit queued runs first); this
    # waits for the timer's send to be answered, so that the database is not emptied for the next test meanwhile.
    assert handle.flush() is None


def test_two_clients_on_one_chat_resolve_conflicts_without_losing_writes(live_server, user, token):
    chat = chat_create(user=user, title="Two tabs")
    tab_a = SyncClient(live_server.url, token=token, debounce=0).chat(chat.pk)
    tab_b = SyncClient(live_server.url, token=token, debounce=0).chat(chat.pk)
    tab_a.refresh()
    tab_b.refresh()
    tab_a.append([{"name": "A", "mes": "from A"}])
    tab_b.append([{"name": "B", "mes": "from B"}])  # B's integrity is stale: 409, re-read, append again
    tab_a.edit(0, "mes", "from A, edited")  # now A is stale
    assert [m["mes"] for m in exported(chat)[1:]] == ["from A, edited", "from B"]
    assert tab_b.client.stats.conflicts == 1 and tab_a.client.stats.conflicts == 1


def test_a_patch_that_no_longer_fits_is_raised(live_server, user, token):
    chat = chat_create(user=user, title="Gone")
    handle = SyncClient(live_server.url, token=token, debounce=0).chat(chat.pk)
    with pytest.raises(SyncError) as caught:
        handle.edit(5, "mes", "no such message")
    assert caught.value.status == 409 and caught.value.body["error"] == "patch_conflict"


def test_concurrent_clients_lose_and_double_nothing(live_server, user, token):
    chat = chat_create(user=user, title="Crowd")
    per_client, clients = 5, 6

    def work(n):
        handle = SyncClient(live_server.url, token=token, debounce=0).chat(chat.pk)
        for i in range(per_client):
            handle.append([{"name": f"client {n}", "mes": f"{n}:{i}"}])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    texts = [m["mes"] for m in exported(chat)[1:]]
    assert sorted(texts) == sorted(f"{n}:{i}" for n in range(clients) for i in range(per_client))
    assert Chat.objects.get(pk=chat.pk).message_count == clients * per_client


class FlakyTransport(httpx.BaseTransport):
    """Real HTTP, except that the first `failures` requests fail to connect."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.real = httpx.HTTPTransport()

    def handle_request(self, request):
        if self.failures > 0:
            self.failures -= 1
            raise httpx.ConnectError("connection refused (simulated)", request=request)
        return self.real.handle_request(request)


@pytest.mark.django_db(transaction=True)
def test_queued_edits_survive_a_network_failure(live_server, user):
    token = api_token_create(user=user, name="flaky")[1]
    chat = chat_create(user=user, title="Flaky")
    transport = FlakyTransport(failures=0)
    http = httpx.Client(base_url=live_server.url + "/api/v1", transport=transport)
    client = SyncClient(live_server.url, token=token, debounce=0.05, network_retries=0, http=http)
    handle = client.chat(chat.pk)
    handle.append([{"name": "Mira", "mes": "a"}])
    transport.failures = 1
    with pytest.raises(httpx.ConnectError):
        handle.edit(0, "mes", "b")
        handle.flush()
    handle.edit(0, "extra", {"k": 1})
    handle.flush()
    assert exported(chat)[1]["mes"] == "b" and exported(chat)[1]["extra"] == {"k": 1}


def test_two_devices_share_a_lorebook_over_http(live_server, user, token):
    """A book made offline on the laptop reaches the phone; the phone's entry edit and a deletion come back."""
    client = SyncClient(live_server.url, token=token)
    laptop, phone = client.instance("laptop"), client.instance("phone")
    entries = {"0": {"uid": 0, "key": ["lantern"], "content": "Whale oil.", "custom": 7}}
    uid = laptop.create("lorebook", {"name": "Harbour", "scope": "linked", "book": {"entries": entries}})
    laptop.sync()
    phone.sync()
    book = phone.local("lorebook")[uid]
    assert book["name"] == "Harbour" and book["book"]["entries"]["0"]["custom"] == 7
    edited = {"0": {**book["book"]["entries"]["0"], "content": "Fish oil."}}
    phone.update("lorebook", uid, {"book": {"entries": edited}})
    phone.sync()
    laptop.sync()
    assert laptop.local("lorebook")[uid]["book"]["entries"]["0"]["content"] == "Fish oil."
    laptop.delete("lorebook", uid)
    laptop.sync()
    phone.sync()
    assert uid not in phone.local("lorebook")
