"""What the SillyTavern extension needs of the server: a chat found by its client key, the import's update mode,
exports whose integrity slug SillyTavern can trust, CORS for its origin."""

import json

import pytest
from rest_framework.test import APIClient

from apps.chats.models import Chat, ChatRevision
from apps.common.management.commands.serve import DEFAULT_ADDRPORT
from tests.chats.helpers import fixture_bytes, if_match, json_lines

pytestmark = pytest.mark.django_db

KEY = "st:char:Aqua.png/Aqua - 2024-05-01@12h00m00s"
FILE_SLUG = "0b8f0d3e-8c1c-4c59-9d1e-5b6f5f8a1c2d"


def _import(api: APIClient, data: bytes, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return api.generic(
        "POST", f"/api/v1/chats/import?{query}", data, content_type="application/jsonl", **params.pop("headers", {})
    )


def _export(api: APIClient, chat_id: int) -> list:
    response = api.get(f"/api/v1/chats/{chat_id}/export")
    assert response.status_code == 200
    return json_lines(b"".join(response.streaming_content))


def _append(api: APIClient, chat_id: int, integrity, text: str, *, mirror: bool):
    url = f"/api/v1/chats/{chat_id}/append" + ("?mirror=true" if mirror else "")
    message = {"name": "User", "is_user": True, "mes": text, "send_date": "2026-11-22T10:00:00.000Z"}
    response = api.post(url, {"messages": [message]}, format="json", **if_match(integrity))
    assert response.status_code == 200, response.content
    return response.json()["integrity"]


# ------------------------------------------------------------------------------------------------ client key


def test_importing_with_a_client_key_twice_updates_the_one_chat_and_keeps_what_it_replaced(api):
    data = fixture_bytes("current_swipes.jsonl")
    first = _import(api, data, client_key=KEY)
    assert first.status_code == 201, first.content
    assert first.json()["created"] is True and first.json()["client_key"] == KEY
    chat_id = first.json()["id"]

    longer = data + b"\n" + json.dumps({"name": "User", "is_user": True, "mes": "one more"}).encode()
    second = _import(api, longer, client_key=KEY)
    assert second.status_code == 200, second.content
    assert second.json() | {"integrity": None} == {
        "id": chat_id,
        "title": first.json()["title"],
        "total_messages": first.json()["total_messages"] + 1,
        "integrity": None,
        "writes": first.json()["writes"] + 1,
        "client_key": KEY,
        "created": False,
    }
    assert Chat.objects.filter(client_key=KEY).count() == 1
    assert _export(api, chat_id)[-1]["mes"] == "one more"
    # The replaced contents are a revision that can be restored.
    revision = ChatRevision.objects.get(chat_id=chat_id)
    assert revision.message_count == first.json()["total_messages"]


def test_a_chat_is_found_by_its_client_key_and_only_by_its_owner(api, other_api):
    chat_id = _import(api, fixture_bytes("current_swipes.jsonl"), client_key=KEY).json()["id"]
    found = api.get("/api/v1/chats/", {"client_key": KEY}).json()
    assert [c["id"] for c in found["results"]] == [chat_id]
    assert api.get("/api/v1/chats/", {"client_key": KEY + "x"}).json()["results"] == []
    assert other_api.get("/api/v1/chats/", {"client_key": KEY}).json()["results"] == []
    # Another account may use the same key for its own chat.
    theirs = _import(other_api, fixture_bytes("current_swipes.jsonl"), client_key=KEY)
    assert theirs.status_code == 201 and theirs.json()["id"] != chat_id


def test_the_import_update_mode_names_a_chat_checks_if_match_and_refuses_anothers(api, other_api):
    data = fixture_bytes("current_swipes.jsonl")
    chat = Chat.objects.get(pk=_import(api, data).json()["id"])
    stale = _import(api, data, chat=chat.pk, headers=if_match("00000000-0000-4000-8000-000000000000"))
    assert stale.status_code == 409 and stale.json()["error"] == "integrity"
    assert _import(other_api, data, chat=chat.pk).status_code == 404
    assert Chat.objects.get(pk=chat.pk).integrity == chat.integrity
    updated = _import(api, data, chat=chat.pk, client_key=KEY, headers=if_match(chat))
    assert updated.status_code == 200 and updated.json()["client_key"] == KEY
    assert Chat.objects.filter(user=chat.user).count() == 1


def test_a_client_key_names_one_chat_per_account(api):
    data = fixture_bytes("current_swipes.jsonl")
    _import(api, data, client_key=KEY)
    other = api.post("/api/v1/chats/", {"title": "Other", "client_key": KEY}, format="json")
    assert other.status_code == 409
    assert other.json()["error"] == "client_key_taken" and other.json()["field"] == "client_key"
    assert Chat.objects.filter(title="Other").count() == 0
    too_long = _import(api, data, client_key="k" * 501)
    assert too_long.status_code == 400 and "client_key" in too_long.content.decode()


# ----------------------------------------------------------------------------------------- export integrity


def test_an_export_keeps_the_files_slug_until_lorekeeper_changes_the_chat(api):
    chat_id = _import(api, fixture_bytes("current_swipes.jsonl")).json()["id"]
    assert _export(api, chat_id)[0]["chat_metadata"]["integrity"] == FILE_SLUG

    integrity = Chat.objects.get(pk=chat_id).integrity
    integrity = _append(api, chat_id, integrity, "written in Lorekeeper", mirror=False)
    header = _export(api, chat_id)[0]
    fresh = header["chat_metadata"]["integrity"]
    assert fresh != FILE_SLUG
    assert _export(api, chat_id)[0]["chat_metadata"]["integrity"] == fresh  # the same state, the same file
    assert Chat.objects.get(pk=chat_id).chat_metadata["integrity"] == FILE_SLUG  # stored as the file had it

    # The extension mirroring the file makes the chat equal to it again: the file's slug comes back.
    _append(api, chat_id, integrity, "synced from SillyTavern", mirror=True)
    assert _export(api, chat_id)[0]["chat_metadata"]["integrity"] == FILE_SLUG


def test_the_web_export_carries_the_fresh_slug_too(api, web):
    chat_id = _import(api, fixture_bytes("current_swipes.jsonl")).json()["id"]
    _append(api, chat_id, Chat.objects.get(pk=chat_id).integrity, "written in Lorekeeper", mirror=False)
    response = web.get(f"/chats/{chat_id}/export/")
    header = json_lines(b"".join(response.streaming_content))[0]
    assert header["chat_metadata"]["integrity"] != FILE_SLUG


# ---------------------------------------------------------------------------------------------------- CORS


def test_preflight_from_sillytavern_needs_no_token_and_allows_the_write_headers(client, settings):
    settings.CORS_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    response = client.options(
        "/api/v1/chats/1/append",
        HTTP_ORIGIN="http://127.0.0.1:8000",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type, if-match, idempotency-key",
    )
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "http://127.0.0.1:8000"
    allowed = {h.strip() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "if-match", "idempotency-key"} <= allowed
    assert "Access-Control-Allow-Credentials" not in response


def test_the_redirect_to_https_answers_cors_so_the_extension_can_say_so(client, settings):
    # The extension follows no redirect (a POST redirected comes back a GET): a browser shows it the redirect only
    # when the preflight was answered and the 301 carries the CORS headers. Otherwise it is a network error, and
    # the person reads "unreachable".
    settings.CORS_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    settings.SECURE_SSL_REDIRECT = True
    preflight = client.options(
        "/api/v1/chats/1/append",
        HTTP_ORIGIN="http://127.0.0.1:8000",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type",
    )
    assert preflight.status_code == 200 and preflight["Access-Control-Allow-Origin"] == "http://127.0.0.1:8000"
    write = client.post(
        "/api/v1/chats/1/append", {}, content_type="application/json", HTTP_ORIGIN="http://127.0.0.1:8000",
        HTTP_AUTHORIZATION="Bearer lk_x",
    )  # fmt: skip
    assert write.status_code == 301 and write["Location"].startswith("https://")
    assert write["Access-Control-Allow-Origin"] == "http://127.0.0.1:8000"
    page = client.get("/accounts/login/", HTTP_ORIGIN="http://127.0.0.1:8000")
    assert page.status_code == 301 and "Access-Control-Allow-Origin" not in page


def test_api_answers_expose_the_etag_to_sillytavern_only(api, settings):
    settings.CORS_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    chat_id = _import(api, fixture_bytes("current_swipes.jsonl")).json()["id"]
    allowed = api.get(f"/api/v1/chats/{chat_id}/", HTTP_ORIGIN="http://127.0.0.1:8000")
    assert allowed["Access-Control-Allow-Origin"] == "http://127.0.0.1:8000"
    assert "ETag" in allowed["Access-Control-Expose-Headers"]
    elsewhere = api.get(f"/api/v1/chats/{chat_id}/", HTTP_ORIGIN="https://evil.example")
    assert "Access-Control-Allow-Origin" not in elsewhere


def test_the_web_ui_answers_no_cors(client, settings):
    settings.CORS_ALLOWED_ORIGINS = ["http://127.0.0.1:8000"]
    response = client.get("/accounts/login/", HTTP_ORIGIN="http://127.0.0.1:8000")
    assert "Access-Control-Allow-Origin" not in response


def test_make_run_does_not_take_sillytaverns_port():
    assert not DEFAULT_ADDRPORT.endswith(":8000")


# ------------------------------------------------------------------------------------------ web: replace a chat


def test_the_chat_page_puts_a_newer_file_over_the_chat_and_keeps_the_old_one(api, web, other_user):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = fixture_bytes("current_swipes.jsonl")
    chat = Chat.objects.get(pk=_import(api, data).json()["id"])
    page = web.get(f"/chats/{chat.pk}/")
    assert page.status_code == 200 and "Replace with a newer file" in page.content.decode()

    newer = data + b"\n" + json.dumps({"name": "User", "is_user": True, "mes": "written later"}).encode()
    upload = SimpleUploadedFile("tavern.jsonl", newer, content_type="application/jsonl")
    response = web.post("/chats/import/", {"file": upload, "replace": chat.pk, "title": chat.title})
    assert response.status_code == 302 and response["Location"] == f"/chats/{chat.pk}/"
    assert Chat.objects.filter(user=chat.user).count() == 1
    assert _export(api, chat.pk)[-1]["mes"] == "written later"
    assert ChatRevision.objects.filter(chat=chat).count() == 1

    theirs = Chat.objects.create(user=other_user, title="Theirs")
    upload = SimpleUploadedFile("tavern.jsonl", newer, content_type="application/jsonl")
    assert web.post("/chats/import/", {"file": upload, "replace": theirs.pk}).status_code == 404
    assert Chat.objects.get(pk=theirs.pk).message_count == 0
