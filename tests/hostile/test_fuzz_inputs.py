"""Hostile input (hypothesis): SillyTavern JSONL files mutated and broken in every way, and arbitrary JSON sent to
every kind of write — the answer is never a server error, a refusal is a 4xx with a message, and a refused write
leaves the database exactly as it was. Then the cases people actually try: oversized and deeply nested bodies,
invalid UTF-8, a huge `extra`, and markup or template syntax in text the pages show."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from apps.accounts.models import SettingsDocument
from apps.chats.models import Character, Chat, Message
from apps.chats.services.chats import chat_create
from apps.memories.models import Memory
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db
FUZZ = settings(
    max_examples=int(os.environ.get("LOREKEEPER_FUZZ_EXAMPLES_JSON", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
message_keys = st.sampled_from(
    ["name", "is_user", "is_system", "mes", "send_date", "swipes", "swipe_id", "swipe_info", "extra"]
)
message_like = st.dictionaries(message_keys | st.text(max_size=8), json_values, max_size=6)


def snapshot(user) -> tuple:
    return (
        list(Chat.objects.filter(user=user).values_list("id", "integrity", "message_count", "chat_metadata")),
        list(Message.objects.filter(chat__user=user).values_list("id", "index", "mes", "extra", "swipes")),
        list(Memory.objects.filter(user=user).values_list("id", "content", "status")),
        list(Character.objects.filter(user=user).values_list("id", "name")),
        list(SettingsDocument.objects.filter(user=user).values_list("data", "integrity")),
    )


def refused_cleanly(response, before, user) -> None:
    assert response.status_code < 500, response.content[:300]
    if response.status_code >= 400:
        body = response.json()
        assert body, "a refusal says why"
        assert snapshot(user) == before, "a refused write changed the database"


@pytest.fixture
def client(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


lines = st.lists(
    st.one_of(
        message_like.map(lambda m: json.dumps(m).encode()),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=40),
        st.just(b'{"mes": "\\ud800 lone surrogate"}'),
        st.just(b'{"mes": "nul \\u0000 inside"}'),
        st.just(b"\xff\xfe not utf-8"),
    ),
    max_size=6,
)
headers = st.one_of(
    st.just(b'{"user_name":"You","character_name":"Mira","create_date":1674559896839}'),
    st.just(b'{"chat_metadata":{"integrity":"x"},"user_name":"unused","character_name":"unused"}'),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=30),
)


@FUZZ
@given(header=headers, body=lines, newline=st.sampled_from([b"\n", b"\r\n"]))
def test_a_broken_jsonl_file_is_refused_with_its_line_and_leaves_nothing(user, client, header, body, newline):
    before = snapshot(user)
    data = newline.join([header, *body])
    response = client.generic("POST", "/api/v1/chats/import", data, content_type="application/jsonl")
    refused_cleanly(response, before, user)
    if response.status_code == 201:
        Chat.objects.filter(pk=response.json()["id"]).delete()


WRITES = [
    ("post", "/api/v1/chats/{chat}/append"),
    ("post", "/api/v1/chats/{chat}/patch"),
    ("patch", "/api/v1/chats/{chat}/metadata"),
    ("post", "/api/v1/chats/{chat}/messages/"),
    ("patch", "/api/v1/chats/{chat}/messages/0/"),
    ("put", "/api/v1/chats/{chat}/messages/0/data/st_bme"),
    ("post", "/api/v1/chats/{chat}/context"),
    ("post", "/api/v1/memories/"),
    ("post", "/api/v1/memories/search"),
    ("post", "/api/v1/characters/"),
    ("patch", "/api/v1/settings"),
    ("post", "/api/v1/sync/push"),
    ("post", "/api/v1/sync/pull"),
    ("patch", "/api/v1/injection/settings"),
]


@pytest.mark.parametrize(("method", "path"), WRITES)
@FUZZ
@given(body=json_values)
def test_arbitrary_json_never_breaks_a_write(user, client, mira_chat, method, path, body):
    if not Message.objects.filter(chat=mira_chat).exists():
        Message.objects.create(chat=mira_chat, index=0, name="Mira", mes="Hello.")
        Chat.objects.filter(pk=mira_chat.pk).update(message_count=1)
    before = snapshot(user)
    headers = {"HTTP_IF_MATCH": f'"{Chat.objects.get(pk=mira_chat.pk).integrity}"'}
    response = getattr(client, method)(path.format(chat=mira_chat.pk), body, format="json", **headers)
    refused_cleanly(response, before, user)


def test_a_body_over_the_limit_is_413(client, mira_chat, settings):
    settings.LOREKEEPER_MAX_JSON_BYTES = 1000
    response = client.post(f"/api/v1/chats/{mira_chat.pk}/append", {"messages": [{"mes": "x" * 2000}]}, format="json")
    assert response.status_code == 413 and "larger than" in response.json()["message"]


def test_deeply_nested_json_is_a_400(user, client, mira_chat):
    before = snapshot(user)
    body = "[" * 100_000 + "]" * 100_000
    response = client.generic("POST", f"/api/v1/chats/{mira_chat.pk}/append", body, content_type="application/json")
    assert response.status_code == 400 and "JSON parse error" in json.dumps(response.json())
    assert snapshot(user) == before


def test_invalid_utf8_is_a_400(user, client, mira_chat):
    response = client.generic(
        "POST", "/api/v1/memories/search", b'{"query": "\xff\xfe"}', content_type="application/json"
    )
    assert response.status_code == 400


def test_a_huge_extra_is_stored_whole_or_refused_whole(user, client, mira_chat):
    extra = {"st_bme": {"blob": "x" * 3_000_000, "nested": [{"k": i} for i in range(20_000)]}}
    response = client.post(
        f"/api/v1/chats/{mira_chat.pk}/append",
        {"messages": [{"name": "Mira", "mes": "Big.", "extra": extra}]},
        format="json",
        HTTP_IF_MATCH=f'"{mira_chat.integrity}"',
    )
    assert response.status_code in (200, 201, 413), response.content[:200]
    if response.status_code in (200, 201):
        assert Message.objects.get(chat=mira_chat, index=0).extra == extra


MARKUP = '<script>alert("x")</script><img src=x onerror=alert(1)>{{ 7|add:7 }}{% debug %}${7*7}'


def test_markup_and_template_syntax_in_text_are_shown_not_run(web, user):
    character = CharacterFactory(user=user, name=f"Mira {MARKUP}")
    chat = chat_create(user=user, title=f"Title {MARKUP}", character_ids=[character.pk], user_name="Rowan")
    Message.objects.create(chat=chat, index=0, name=f"Mira {MARKUP}", mes=f"Hello {MARKUP}")
    Chat.objects.filter(pk=chat.pk).update(message_count=1)
    memory = Memory.objects.create(
        user=user, character=character, kind="fact", content=f"Fact {MARKUP}", content_hash="x"
    )
    from apps.sync.services.instances import instance_register

    instance_register(user=user, key="laptop", name=f"Laptop {MARKUP}")
    for path in (
        f"/chats/{chat.pk}/",
        "/chats/",
        "/characters/",
        f"/memories/{memory.pk}/",
        "/memories/",
        "/devices/",
        f"/chats/{chat.pk}/story/",
    ):
        response = web.get(path)
        assert response.status_code == 200, path
        page = response.content.decode()
        assert "<script>alert" not in page and "<img src=x" not in page, path
        assert "sql_queries" not in page, path  # {% debug %} never ran
        assert "&lt;script&gt;" in page and "{{ 7|add:7 }}" in page, path  # shown as the text it is


@pytest.mark.parametrize("url", ["/api/v1/sync/status?instance=e%009", "/api/v1/sync/instances/ab%00cd"])
def test_an_instance_key_with_a_nul_character_is_unknown_not_a_server_error(api, url):
    # Found by the long schema fuzz (make test-all): the key reached a lookup PostgreSQL cannot make.
    assert api.get(url).status_code == 404


def _nested(depth: int) -> list:
    """An array `depth` deep: [[[…]]]."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


# Under what the request's parser follows (the 400 above), past what a value may hold: before the limit, 300 levels
# were stored, and reading them back failed wherever the reader's own stack was deep.
DEEP = 300


def _deep_writes(chat: Chat) -> list[tuple[str, str, str, str]]:
    """(method, path, body, content type) of the writes that store a person's free-form JSON, each with a value
    DEEP levels deep where the person's own data goes."""
    deep = _nested(DEEP)
    append = {"messages": [{"mes": "Hi.", "is_user": True, "extra": {"deep": deep}}], "integrity": str(chat.integrity)}
    world = {"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "Oil.", "deep": deep}}}
    return [
        ("POST", f"/api/v1/chats/{chat.pk}/append", json.dumps(append), "application/json"),
        ("PATCH", f"/api/v1/chats/{chat.pk}/metadata", json.dumps({"deep": deep}), "application/merge-patch+json"),
        ("PATCH", f"/api/v1/chats/{chat.pk}/messages/0/data/st_bme", json.dumps({"values": {"deep": deep}}),
         "application/json"),
        ("PATCH", "/api/v1/settings", json.dumps({"ext": {"deep": deep}}), "application/merge-patch+json"),
        ("POST", "/api/v1/lorebooks/", json.dumps({"name": "Harbour", "data": world}), "application/json"),
        ("POST", "/api/v1/chats/import", b'{"user_name":"You","character_name":"Mira"}\n'.decode()
         + json.dumps({"mes": "Hi.", "is_user": True, "extra": {"deep": deep}}), "application/jsonl"),
    ]  # fmt: skip


def test_a_value_nested_past_the_limit_is_a_400_naming_it_and_stores_nothing(user, client, mira_chat):
    Message.objects.create(chat=mira_chat, index=0, name="Mira", mes="Hello.")
    Chat.objects.filter(pk=mira_chat.pk).update(message_count=1)
    mira_chat.refresh_from_db()
    settings_integrity = client.get("/api/v1/settings").json()["integrity"]
    for method, path, body, content_type in _deep_writes(mira_chat):
        before = snapshot(user)
        match = settings_integrity if path == "/api/v1/settings" else mira_chat.integrity
        headers = {} if path.endswith(("/import", "/lorebooks/")) else {"HTTP_IF_MATCH": f'"{match}"'}
        response = client.generic(method, path, body, content_type=content_type, **headers)
        assert response.status_code == 400, (path, response.status_code, response.content[:300])
        assert "more than 100 deep" in response.content.decode(), (path, response.content[:300])
        assert snapshot(user) == before, path


def test_a_value_nested_as_deep_as_the_limit_is_stored_and_read_back(user, client, mira_chat):
    deep = _nested(90)
    body = {
        "messages": [{"mes": "Hi.", "is_user": True, "extra": {"deep": deep}}],
        "integrity": str(mira_chat.integrity),
    }
    assert client.post(f"/api/v1/chats/{mira_chat.pk}/append", body, format="json").status_code == 200
    assert Message.objects.get(chat=mira_chat, index=0).extra == {"deep": deep}
