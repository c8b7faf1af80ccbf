"""Input that once reached a 500 or a wrong answer (found in review): each answers a clean 4xx now."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.chats.models import Chat
from apps.chats.services.chats import chat_export_lines, chat_import, chat_update
from apps.memories.services.indexing import chat_index_messages
from tests.chats.factories import ChatFactory
from tests.chats.helpers import fixture_bytes, json_lines, stream

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "line",
    [b'{"mes":"x","extra":{"n":1e400}}', b'{"mes":"x","send_date":-1e999}'],
)
def test_numbers_beyond_a_float_answer_400_naming_the_line(api, line):
    data = b'{"user_name":"a","character_name":"b"}\n' + line
    response = api.generic("POST", "/api/v1/chats/import", data, content_type="application/jsonl")
    assert response.status_code == 400
    assert response.json()["extra"]["line"] == 2 and "too large" in response.json()["message"]
    assert not Chat.objects.exists()


@pytest.mark.parametrize("send_date", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_send_date_at_the_edge_of_the_calendar_breaks_no_page_nor_memory(api, web, user, send_date):
    """A date a day from year 1 or 9999: shown in a person's time zone it passed the years datetime holds (the chat
    page raised OverflowError), and a memory stored with it could not be read back (DataError on every list of the
    person's memories). It is kept as sent, and read as no moment."""
    line = json.dumps({"name": "Rowan", "is_user": True, "mes": "Hi.", "send_date": send_date}).encode()
    data = b'{"user_name":"Rowan","character_name":"Mira"}\n' + line
    response = api.generic("POST", "/api/v1/chats/import", data, content_type="application/jsonl")
    assert response.status_code == 201, response.content
    chat = Chat.objects.get(pk=response.json()["id"])
    assert web.get(f"/chats/{chat.pk}/").status_code == 200
    chat_index_messages(chat_id=chat.pk)
    assert api.get("/api/v1/memories/").status_code == 200
    [memory] = api.get("/api/v1/memories/", {"chat": chat.pk}).json()["results"]
    assert api.get(f"/api/v1/memories/{memory['id']}/").status_code == 200
    assert json.loads(b"".join(chat_export_lines(chat=chat)).splitlines()[1])["send_date"] == send_date  # as sent


def test_a_card_with_an_infinite_number_is_refused(api):
    upload = SimpleUploadedFile("c.json", b'{"name": "x", "n": 1e400}')
    assert api.post("/api/v1/characters/import", {"file": upload}, format="multipart").status_code == 400


@pytest.mark.parametrize("path", ["/api/v1/chats/?search=%00", "/api/v1/characters/?search=a%00b"])
def test_nul_in_api_search_is_harmless(api, path):
    assert api.get(path).status_code == 200


@pytest.mark.parametrize("path", ["/chats/?q=%00", "/characters/?q=%00"])
def test_nul_in_page_search_is_harmless(web, path):
    assert web.get(path).status_code == 200


def test_nul_in_the_import_title_answers_400_naming_it(api):
    data = fixture_bytes("oldest_header.jsonl")
    response = api.generic("POST", "/api/v1/chats/import?title=a%00b", data, content_type="application/jsonl")
    assert response.status_code == 400 and "title" in response.json()
    upload = SimpleUploadedFile("a.jsonl", data)
    response = api.post("/api/v1/chats/import", {"file": upload, "title": "a\x00b"}, format="multipart")
    assert response.status_code == 400 and "title" in response.json()
    assert not Chat.objects.exists()


@pytest.mark.parametrize("ids", ["%C2%B2", "1,x", "99999999999999999999999"])
def test_odd_character_ids_answer_400_naming_the_field(api, ids):
    data = fixture_bytes("oldest_header.jsonl")
    response = api.generic("POST", f"/api/v1/chats/import?character_ids={ids}", data, content_type="application/jsonl")
    assert response.status_code == 400 and response.json()["extra"]["field"] == "character_ids"


def test_raw_body_import_works_for_a_session_client_with_csrf(user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/chats/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/api/v1/chats/import",
        fixture_bytes("oldest_header.jsonl"),
        content_type="application/jsonl",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 201, response.content


def test_non_ascii_titles_download_with_a_proper_file_name(web, user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("oldest_header.jsonl")), title="日本の話")
    disposition = web.get(f"/chats/{chat.pk}/export/")["Content-Disposition"]
    assert disposition.startswith("attachment;") and "filename*=utf-8''" in disposition


def test_view_only_staff_cannot_run_the_destructive_admin_actions(client, user):
    chat = ChatFactory(user=user)
    viewer = get_user_model().objects.create_user(username="viewer", password="x", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__in=["view_chat", "view_user"]))
    client.force_login(viewer)
    client.post("/admin/chats/chat/", {"action": "delete_chats", "_selected_action": [chat.pk]})
    client.post("/admin/auth/user/", {"action": "deactivate_users", "_selected_action": [user.pk]})
    user.refresh_from_db()
    assert Chat.objects.filter(pk=chat.pk).exists() and user.is_active


def test_an_admin_cannot_deactivate_themselves(client):
    admin = get_user_model().objects.create_superuser(username="root", password="x")
    client.force_login(admin)
    client.post("/admin/auth/user/", {"action": "deactivate_users", "_selected_action": [admin.pk]})
    admin.refresh_from_db()
    assert admin.is_active


def test_create_api_token_with_a_blank_name_is_a_command_error(user):
    with pytest.raises(CommandError, match="name"):
        call_command("create_api_token", "alice", "--name", "  ")


def test_a_headerless_chat_given_header_fields_exports_them(user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("group_headerless.jsonl")))
    chat_update(chat=chat, data={"chat_metadata": {"note": 1}})
    first = json_lines(b"".join(chat_export_lines(chat=chat)))[0]
    assert first["chat_metadata"] == {"note": 1}


def test_htmx_is_told_to_show_4xx_fragments(web):
    assert '"code": "4..", "swap": true' in web.get("/chats/").content.decode()


PNG_CARD = "This file is a PNG image (a character card goes on the Characters page)"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, PNG_CARD),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 64, "This file is a JPEG image"),
        (b"PK\x03\x04" + b"\x00" * 64, "This file is a ZIP archive"),
        (b'{\n  "name": "Seraphina",\n  "description": "A guardian."\n}\n', "This file is one JSON document"),
        (b'[{"mes": "a"}, {"mes": "b"}]', "This file is one JSON document"),
    ],
)
def test_a_file_that_is_not_a_chat_is_named_for_what_it_is(api, data, said):
    from apps.chats.models import Chat

    response = api.generic("POST", "/api/v1/chats/import", data, content_type="application/jsonl")
    assert response.status_code == 400 and response.json()["message"].startswith(said)
    assert response.json()["message"].endswith("not a SillyTavern chat (.jsonl).")
    assert not Chat.objects.exists()


def test_admin_message_search_finds_words_of_the_message_text(client, user):
    from django.contrib.auth import get_user_model

    from apps.chats.services.chats import chat_create
    from apps.chats.services.writes import chat_append

    chat = chat_create(user=user, title="Harbour")
    lines = ["Mira lit the lanterns along the pier.", "Rowan counted the crowns."]
    chat_append(chat=chat, messages=[{"name": "Mira", "mes": text} for text in lines], integrity=chat.integrity)
    client.force_login(get_user_model().objects.create_superuser(username="root", password="root pass 12345"))

    found = client.get("/admin/chats/message/", {"q": "lantern"}).context["cl"].result_list

    assert [message.mes for message in found] == ["Mira lit the lanterns along the pier."]
