"""Edge cases found in review: each once reached a 500 or lost a write."""

import json

import httpx
import pytest

from apps.accounts.services import api_token_create
from apps.chats.models import Chat
from apps.chats.services.chats import chat_create, chat_import
from apps.sync.client import SyncClient
from tests.chats.helpers import fixture_bytes, json_lines, stream
from tests.sync.helpers import exported, if_match


def _patch(api, chat, operations):
    integrity = Chat.objects.get(pk=chat.pk).integrity
    return api.post(f"/api/v1/chats/{chat.pk}/patch", {"operations": operations}, format="json", **if_match(integrity))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("op", "status"),
    [
        ({"op": "test", "path": "/²", "value": 1}, 409),
        ({"op": "test", "path": "/0/swipes/٠", "value": 1}, 409),
        ({"op": "add", "path": "/0/extra/a\u0000b", "value": 1}, 400),
        ({"op": "test", "path": "/2/extra/my_extension/numbers/3", "value": 10**400}, 409),
    ],
)
def test_odd_pointers_and_numbers_answer_4xx(api, chat, op, status):
    before = exported(chat)
    assert _patch(api, chat, [op]).status_code == status
    assert exported(chat) == before


@pytest.mark.django_db
def test_a_patch_of_only_tests_leaves_the_integrity(api, chat):
    response = _patch(api, chat, [{"op": "test", "path": "/0/swipe_id", "value": 0}])
    assert response.json()["applied"] == 1 and response.json()["integrity"] == str(chat.integrity)


@pytest.mark.django_db
def test_extension_data_on_a_message_whose_extra_is_not_an_object(api, user):
    chat = chat_import(user=user, stream=stream(b'{"user_name":"a","character_name":"b"}\n{"mes":"x","extra":null}'))
    response = api.patch(
        f"/api/v1/chats/{chat.pk}/messages/0/data/ns", {"values": {"k": 1}}, format="json", **if_match(chat)
    )
    assert response.status_code == 200
    assert exported(chat)[1]["extra"] == {"ns": {"k": 1}}


@pytest.mark.django_db
def test_a_namespace_with_a_nul_is_refused(api, chat):
    url = f"/api/v1/chats/{chat.pk}/messages/0/data/a%00b"
    assert api.patch(url, {"values": {"k": 1}}, format="json", **if_match(chat)).status_code == 400


@pytest.mark.django_db
def test_an_idempotency_key_reused_for_a_different_save_is_refused(api, chat):
    headers = {"HTTP_IDEMPOTENCY_KEY": "save-1", **if_match(chat)}
    first = [{"user_name": "a", "character_name": "b"}, {"mes": "one"}]
    assert api.post(f"/api/v1/chats/{chat.pk}/save", {"chat": first}, format="json", **headers).status_code == 200
    again = api.post(f"/api/v1/chats/{chat.pk}/save", {"chat": first}, format="json", **headers)
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    other = [{"user_name": "a", "character_name": "b"}, {"mes": "two"}]
    response = api.post(f"/api/v1/chats/{chat.pk}/save", {"chat": other}, format="json", **headers)
    assert response.status_code == 422
    assert exported(chat)[1]["mes"] == "one"


@pytest.mark.django_db
def test_a_raw_import_with_an_idempotency_key_imports_once(api):
    data = fixture_bytes("oldest_header.jsonl")
    for _ in range(2):
        response = api.generic(
            "POST", "/api/v1/chats/import", data, content_type="application/jsonl", HTTP_IDEMPOTENCY_KEY="imp-1"
        )
        assert response.status_code == 201
    assert Chat.objects.count() == 1
    assert json_lines(b"".join(api.get(f"/api/v1/chats/{response.json()['id']}/export").streaming_content)) == (
        json_lines(data)
    )


@pytest.mark.django_db
def test_a_save_with_integers_beyond_64_bits(api, chat):
    lines = [{"user_name": "a", "character_name": "b"}, {"mes": "x", "extra": {"seed": 2**70, "small": 1.5}}]
    body = json.dumps({"chat": lines, "integrity": str(chat.integrity)})
    response = api.generic("POST", f"/api/v1/chats/{chat.pk}/save", body, content_type="application/json")
    assert response.status_code == 200, response.content
    assert exported(chat) == lines


@pytest.mark.django_db
def test_a_headerless_save_leaves_no_old_header_behind(api, chat):
    saved = api.post(
        f"/api/v1/chats/{chat.pk}/save",
        {"chat": [{"name": "Bram", "mes": "Ale!"}], "integrity": str(chat.integrity)},
        format="json",
    )
    assert exported(chat) == [{"name": "Bram", "mes": "Ale!"}]
    patched = api.generic(
        "PATCH",
        f"/api/v1/chats/{chat.pk}/metadata",
        '{"a": 1}',
        content_type="application/merge-patch+json",
        **if_match(saved.json()["integrity"]),
    )
    assert patched.status_code == 200
    assert exported(chat)[0] == {"chat_metadata": {"a": 1}}


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


@pytest.mark.django_db
def test_a_save_with_a_lone_surrogate_is_refused_naming_the_item(api, chat):
    def save(items: str):
        body = '{"chat": [' + items + '], "integrity": "' + str(Chat.objects.get(pk=chat.pk).integrity) + '"}'
        return api.generic("POST", f"/api/v1/chats/{chat.pk}/save", body, content_type="application/json")

    response = save('{"user_name": "a"}, {"mes": "ok"}, {"mes": "bad \\ud800 here"}')
    assert response.status_code == 400, response.content
    assert response.json()["extra"]["field"] == "chat[2]"
    assert save('{"user_name": "a"}, {"mes": "emoji \\ud83d\\ude00"}').status_code == 200
    assert exported(chat)[1]["mes"] == "emoji 😀"
