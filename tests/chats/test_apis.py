import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.chats.models import Character, Chat, Message
from apps.chats.services.chats import chat_import
from tests.chats.factories import CharacterFactory, ChatFactory, add_messages
from tests.chats.helpers import fixture_bytes, if_match, json_lines, stream

pytestmark = pytest.mark.django_db


@pytest.fixture
def aqua(user):
    """A character of the group chat's name."""
    return CharacterFactory(user=user, name="Aqua")


# ------------------------------------------------------------------------------------------------------- tenancy

OWN_OBJECT_ENDPOINTS = [
    ("get", "/api/v1/characters/{character}/", None),
    ("patch", "/api/v1/characters/{character}/", {"name": "Stolen"}),
    ("delete", "/api/v1/characters/{character}/", None),
    ("get", "/api/v1/chats/{chat}/", None),
    ("patch", "/api/v1/chats/{chat}/", {"title": "Stolen"}),
    ("delete", "/api/v1/chats/{chat}/", None),
    ("get", "/api/v1/chats/{chat}/export", None),
    ("get", "/api/v1/chats/{chat}/messages/", None),
    ("post", "/api/v1/chats/{chat}/messages/", {"mes": "intruder"}),
    ("get", "/api/v1/chats/{chat}/messages/0/", None),
    ("patch", "/api/v1/chats/{chat}/messages/0/", {"mes": "intruder"}),
    ("delete", "/api/v1/chats/{chat}/messages/0/", None),
]


@pytest.mark.parametrize(("method", "path", "body"), OWN_OBJECT_ENDPOINTS)
def test_another_users_objects_answer_404_and_stay_untouched(other_api, group_chat, aqua, method, path, body):
    before = (group_chat.integrity, group_chat.title, aqua.name, Message.objects.filter(chat=group_chat).count())
    response = getattr(other_api, method)(path.format(chat=group_chat.pk, character=aqua.pk), body, format="json")
    assert response.status_code == 404
    assert "tavern" not in response.content.decode().lower() and "Aqua" not in response.content.decode()
    group_chat.refresh_from_db()
    aqua.refresh_from_db()
    assert before == (
        group_chat.integrity,
        group_chat.title,
        aqua.name,
        Message.objects.filter(chat=group_chat).count(),
    )


@pytest.mark.parametrize(("method", "path", "body"), OWN_OBJECT_ENDPOINTS)
def test_unauthenticated_requests_answer_401(group_chat, aqua, method, path, body):
    response = getattr(APIClient(), method)(path.format(chat=group_chat.pk, character=aqua.pk), body, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_lists_show_only_the_users_own_objects(api, other_api, group_chat, aqua):
    assert other_api.get("/api/v1/chats/").json()["results"] == []
    assert other_api.get("/api/v1/characters/").json()["results"] == []
    assert [c["id"] for c in api.get("/api/v1/chats/").json()["results"]] == [group_chat.pk]


def test_chat_cannot_be_given_another_users_character(api, other_user, group_chat):
    theirs = CharacterFactory(user=other_user)
    response = api.patch(
        f"/api/v1/chats/{group_chat.pk}/", {"character_ids": [theirs.pk]}, format="json", **if_match(group_chat)
    )
    assert response.status_code == 400
    assert response.json()["extra"]["field"] == "character_ids"


# ---------------------------------------------------------------------------------------------------- characters


def test_character_crud(api):
    response = api.post("/api/v1/characters/", {"name": "Mira", "tags": ["a"], "card_data": {"v": 2}}, format="json")
    assert response.status_code == 201
    character_id = response.json()["id"]
    response = api.patch(f"/api/v1/characters/{character_id}/", {"personality": "gruff"}, format="json")
    assert response.json()["personality"] == "gruff" and response.json()["card_data"] == {"v": 2}
    assert api.get(f"/api/v1/characters/{character_id}/").json()["name"] == "Mira"
    assert api.delete(f"/api/v1/characters/{character_id}/").json() == {"memories_deleted": 0, "memories_kept": 0}
    assert not Character.objects.exists()


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": 1e400}', "[" * 5000 + "]" * 5000, '{"a": "\\ud800"}'])
def test_json_a_form_field_sends_is_read_as_strictly_as_a_json_body(api, user, text):
    """DRF's JSONField read a form's text with json.loads: NaN and 1e400 reached jsonb, and deep nesting the
    stack's end (500s); a lone surrogate failed the encoding. Each is a 400 naming the field, and nothing changes."""
    character = CharacterFactory(user=user, card_data={"v": 2})
    response = api.patch(f"/api/v1/characters/{character.pk}/", {"card_data": text}, format="multipart")
    assert response.status_code == 400 and "card_data" in response.json(), response.content[:300]
    character.refresh_from_db()
    assert character.card_data == {"v": 2}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x", "tags": "nope"}, "tags"),
        ({"name": "x", "card_data": []}, "card_data"),
        ({"name": "x", "card_data": {"k": "a\u0000b"}}, "card_data"),
    ],
)
def test_invalid_character_answers_400_naming_the_field(api, body, field):
    response = api.post("/api/v1/characters/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Character.objects.exists()


def test_character_list_is_cursor_paginated(api, user):
    CharacterFactory.create_batch(5, user=user)
    first = api.get("/api/v1/characters/?limit=2").json()
    second = api.get(first["next"]).json()
    assert len(first["results"]) == 2 and len(second["results"]) == 2
    assert not {c["id"] for c in first["results"]} & {c["id"] for c in second["results"]}


# --------------------------------------------------------------------------------------------------------- chats


def test_chat_detail_has_integrity_metadata_and_total(api, user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("v112_header.jsonl")))
    body = api.get(f"/api/v1/chats/{chat.pk}/").json()
    assert body["integrity"] == str(chat.integrity)
    assert body["chat_metadata"] == {"world_info": "Aqua's World", "main_chat": "Aqua - 2024-05-01@12h00m00s"}
    assert body["total_messages"] == 3
    assert body["characters"] == [{"id": chat.characters.get().pk, "name": "Aqua"}]


def test_chat_create_update_delete(api, aqua):
    response = api.post("/api/v1/chats/", {"title": "New", "character_ids": [aqua.pk]}, format="json")
    assert response.status_code == 201
    created = response.json()
    assert created["character_name"] == "Aqua" and created["total_messages"] == 0
    response = api.patch(
        f"/api/v1/chats/{created['id']}/",
        {"chat_metadata": {"note": 1}},
        format="json",
        **if_match(created["integrity"]),
    )
    assert response.json()["chat_metadata"] == {"note": 1}
    assert response.json()["integrity"] != created["integrity"]
    assert api.delete(f"/api/v1/chats/{created['id']}/").status_code == 204
    assert not Chat.objects.exists()


def test_chat_search(api, user):
    ChatFactory(user=user, title="Dragon's hoard")
    ChatFactory(user=user, title="Tea party")
    titles = [c["title"] for c in api.get("/api/v1/chats/?search=dragon").json()["results"]]
    assert titles == ["Dragon's hoard"]


# -------------------------------------------------------------------------------------------------------- import


def test_multipart_import_answers_201_and_exports_back_the_same_lines(api):
    data = fixture_bytes("current_swipes.jsonl")
    upload = _upload("Seraphina - 2026-09-25.jsonl", data)
    response = api.post("/api/v1/chats/import", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "title", "total_messages", "integrity", "writes", "client_key", "created"}
    assert body["total_messages"] == 3 and body["title"] == "Seraphina - 2026-09-25"
    export = api.get(f"/api/v1/chats/{body['id']}/export")
    assert export["Content-Type"].startswith("application/jsonl")
    assert json_lines(b"".join(export.streaming_content)) == json_lines(data)


def test_raw_body_import_takes_title_from_the_query(api):
    data = fixture_bytes("oldest_header.jsonl")
    response = api.generic("POST", "/api/v1/chats/import?title=Old%20one", data, content_type="application/jsonl")
    assert response.status_code == 201, response.content
    assert response.json()["title"] == "Old one" and response.json()["total_messages"] == 2


def test_multipart_import_takes_title_from_the_query_or_from_its_form_field_first(api):
    data = fixture_bytes("current_swipes.jsonl")
    upload = _upload("Seraphina.jsonl", data)
    response = api.post("/api/v1/chats/import?title=From%20the%20query", {"file": upload}, format="multipart")
    assert response.status_code == 201 and response.json()["title"] == "From the query"
    upload = _upload("Seraphina.jsonl", data)
    body = {"file": upload, "title": "From the form"}
    response = api.post("/api/v1/chats/import?title=From%20the%20query", body, format="multipart")
    assert response.status_code == 201 and response.json()["title"] == "From the form"


def test_malformed_import_answers_400_naming_the_line_and_stores_nothing(api):
    data = b'{"user_name":"a","character_name":"b"}\n{"mes":"ok"}\n{"mes": broken}\n'
    response = api.generic("POST", "/api/v1/chats/import", data, content_type="application/jsonl")
    assert response.status_code == 400
    assert response.json()["extra"]["line"] == 3
    assert "Line 3" in response.json()["message"]
    assert not Chat.objects.exists() and not Message.objects.exists()


def test_import_without_a_file_field_names_it(api):
    response = api.post("/api/v1/chats/import", {"title": "x"}, format="multipart")
    assert response.status_code == 400 and response.json()["extra"]["field"] == "file"


def test_import_with_another_content_type_answers_415(api):
    response = api.post("/api/v1/chats/import", {"a": 1}, format="json")
    assert response.status_code == 415


def _upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


# ------------------------------------------------------------------------------------------------------ messages


def test_messages_page_by_index(api, user):
    chat = ChatFactory(user=user)
    add_messages(chat, 12)
    page = api.get(f"/api/v1/chats/{chat.pk}/messages/?from_index=5&limit=4").json()
    assert [m["index"] for m in page["results"]] == [5, 6, 7, 8]
    assert page["next_index"] == 9 and page["has_more"] is True and page["total_messages"] == 12
    last = api.get(f"/api/v1/chats/{chat.pk}/messages/?from_index=9&limit=100").json()
    assert [m["index"] for m in last["results"]] == [9, 10, 11]
    assert last["has_more"] is False and last["next_index"] is None


@pytest.mark.parametrize("query", ["from_index=-1", "limit=0", "limit=abc", "limit=100000"])
def test_bad_paging_parameters_answer_400(api, group_chat, query):
    response = api.get(f"/api/v1/chats/{group_chat.pk}/messages/?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()


def test_message_writes_return_the_new_integrity(api, group_chat):
    created = api.post(
        f"/api/v1/chats/{group_chat.pk}/messages/",
        {"mes": "hello", "is_user": True},
        format="json",
        **if_match(group_chat),
    )
    assert created.status_code == 201
    body = created.json()
    assert body["message"]["index"] == 5 and body["total_messages"] == 6
    assert created["ETag"] == f'"{body["integrity"]}"'
    updated = api.patch(
        f"/api/v1/chats/{group_chat.pk}/messages/5/", {"mes": "hello!"}, format="json", **if_match(body["integrity"])
    ).json()
    assert updated["message"]["mes"] == "hello!" and updated["integrity"] != body["integrity"]
    deleted = api.delete(f"/api/v1/chats/{group_chat.pk}/messages/0/", **if_match(updated["integrity"])).json()
    assert deleted["total_messages"] == 5 and deleted["integrity"] != updated["integrity"]
    assert api.get(f"/api/v1/chats/{group_chat.pk}/").json()["integrity"] == deleted["integrity"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "mes"),
        ({"mes": "x", "is_user": "maybe"}, "is_user"),
        ({"mes": "x", "swipe_id": -1}, "swipe_id"),
        ({"mes": "x", "extra": "no"}, "extra"),
        ({"mes": "x\u0000"}, "mes"),
        ({"mes": "x", "swipes": [1, {}]}, "swipes"),
    ],
)
def test_invalid_message_answers_400_naming_the_field(api, group_chat, body, field):
    integrity = group_chat.integrity
    response = api.post(f"/api/v1/chats/{group_chat.pk}/messages/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    group_chat.refresh_from_db()
    assert group_chat.integrity == integrity and group_chat.message_count == 5


def test_message_writes_need_the_integrity_and_refuse_a_stale_one(api, group_chat):
    url = f"/api/v1/chats/{group_chat.pk}/messages/0/"
    assert api.patch(url, {"mes": "x"}, format="json").status_code == 428
    stale = api.patch(url, {"mes": "x"}, format="json", **if_match("00000000-0000-4000-8000-000000000000"))
    assert stale.status_code == 409 and stale.json()["error"] == "integrity"
    assert api.delete(url).status_code == 428
    assert api.get(url).json()["mes"] == "The tavern is loud tonight."


def test_missing_message_answers_404(api, group_chat):
    assert api.get(f"/api/v1/chats/{group_chat.pk}/messages/99/").status_code == 404
    assert api.patch(f"/api/v1/chats/{group_chat.pk}/messages/99/", {"mes": "x"}, format="json").status_code == 404


# -------------------------------------------------------------------------------------------------------- schema


def test_openapi_schema_validates_without_warnings():
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_schema_and_docs_pages_are_served(api):
    assert api.get("/api/v1/schema/").status_code == 200
    assert api.get("/api/v1/docs/").status_code == 200


def test_changing_a_chats_characters_keeps_the_order_given(api, user, mira_chat):
    from apps.chats.selectors import chat_characters_in_order

    first, second, third = (CharacterFactory(user=user, name=name) for name in ("Cato", "Bram", "Aqua"))
    mira = mira_chat.characters.get()
    order = [third.pk, second.pk, mira.pk, first.pk]
    response = api.patch(
        f"/api/v1/chats/{mira_chat.pk}/", {"character_ids": order}, format="json", **if_match(mira_chat)
    )
    assert response.status_code == 200, response.json()
    assert [c.pk for c in chat_characters_in_order(chat=mira_chat)] == order


def test_a_characters_additional_lorebooks_are_kept_and_a_bad_list_is_refused_naming_it(api, user):
    created = api.post(
        "/api/v1/characters/", {"name": "Mira", "extra_books": ["Harbour", " Sea ", "Harbour"]}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["extra_books"] == ["Harbour", "Sea"]
    url = f"/api/v1/characters/{created.json()['id']}/"
    for bad in (["x" * 201], ["x"] * 51, "Harbour", [None]):
        refused = api.patch(url, {"extra_books": bad}, format="json")
        assert refused.status_code == 400 and "extra_books" in refused.content.decode(), bad
    assert api.get(url).json()["extra_books"] == ["Harbour", "Sea"]
    assert api.patch(url, {"extra_books": []}, format="json").json()["extra_books"] == []
