import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.chats.models import Chat
from apps.chats.services.chats import chat_import
from apps.chats.services.messages import message_append
from tests.chats.factories import ChatFactory, add_messages
from tests.chats.helpers import fixture_bytes, json_lines, stream

pytestmark = pytest.mark.django_db


def test_pages_need_sign_in(client):
    assert client.get("/chats/")["Location"].startswith("/accounts/login/")


def test_new_account_lands_on_the_first_run_page_and_loads_the_sample(web):
    assert web.get("/").url == "/welcome/"
    page = web.get("/welcome/").content.decode()
    assert "Load the sample story" in page and 'name="file"' in page
    response = web.post("/chats/sample/")
    chat = Chat.objects.get()
    assert response.url == f"/chats/{chat.pk}/"
    assert web.get("/").url == "/chats/"
    assert "The Lantern Keeper" in web.get(f"/chats/{chat.pk}/").content.decode()


def test_upload_through_the_page_imports_and_redirects(web):
    upload = SimpleUploadedFile("Aqua.jsonl", fixture_bytes("v112_header.jsonl"))
    response = web.post("/chats/import/", {"file": upload}, HTTP_HX_REQUEST="true")
    chat = Chat.objects.get()
    assert response["HX-Redirect"] == f"/chats/{chat.pk}/"
    assert chat.title == "Aqua" and chat.message_count == 3


def test_upload_of_a_bad_file_shows_the_line_and_stores_nothing(web):
    upload = SimpleUploadedFile("bad.jsonl", b'{"user_name":"a"}\n{"mes":"x"}\nnot json\n')
    response = web.post("/chats/import/", {"file": upload}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "Line 3" in response.content.decode() and "<html" not in response.content.decode()
    assert not Chat.objects.exists()
    response = web.post("/chats/import/", {"file": SimpleUploadedFile("bad.jsonl", b"[]")})
    assert response.status_code == 400 and "<html" in response.content.decode()


def test_chat_list_search_answers_the_fragment_to_htmx(web, user):
    ChatFactory(user=user, title="Dragon's hoard")
    ChatFactory(user=user, title="Tea party")
    fragment = web.get("/chats/?q=dragon", HTTP_HX_REQUEST="true").content.decode()
    assert "Dragon" in fragment and "Tea party" not in fragment and "<html" not in fragment
    full = web.get("/chats/?q=tea").content.decode()
    assert "<html" in full and "Tea party" in full and "Dragon" not in full


def test_chat_list_shows_only_own_chats(web, other_user):
    ChatFactory(user=other_user, title="Bob's secret")
    assert "Bob's secret" not in web.get("/chats/").content.decode()


def test_chat_view_opens_on_the_newest_messages_and_loads_older_on_demand(web, user):
    chat = ChatFactory(user=user)
    add_messages(chat, 75)
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "message 74" in page and "message 45" in page and "message 44" not in page
    assert f"/chats/{chat.pk}/older/?before=45" in page
    older = web.get(f"/chats/{chat.pk}/older/?before=45", HTTP_HX_REQUEST="true").content.decode()
    assert "message 44" in older and "message 15" in older and "message 45" not in older
    assert "?before=15" in older
    oldest = web.get(f"/chats/{chat.pk}/older/?before=15").content.decode()
    assert "message 0" in oldest and "?before=" not in oldest


def test_swipes_are_shown_on_demand_with_the_selected_one_marked(web, user):
    chat = chat_import(user=user, stream=stream(fixture_bytes("current_swipes.jsonl")))
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "swipe 1 of 3" in page and "You again?" not in page
    swipes = web.get(f"/chats/{chat.pk}/messages/0/swipes/", HTTP_HX_REQUEST="true").content.decode()
    assert "You again?" in swipes and "Swipe 1 (selected)" in swipes


def test_message_text_is_markdown_with_scripts_removed(web, user):
    chat = ChatFactory(user=user)
    evil = '**bold** <script>alert("x")</script><img src=x onerror="alert(1)"><a href="javascript:alert(2)">l</a>'
    message_append(chat=chat, data={"mes": evil, "name": "Mallory"})
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "<strong>bold</strong>" in page
    assert "<script>alert" not in page and "onerror" not in page and "javascript:alert" not in page


def test_download_button_exports_the_file(web, user):
    data = fixture_bytes("oldest_header.jsonl")
    chat = chat_import(user=user, stream=stream(data), title="Old: one/two")
    response = web.get(f"/chats/{chat.pk}/export/")
    assert response["Content-Disposition"] == 'attachment; filename="Old_ one_two.jsonl"'
    assert json_lines(b"".join(response.streaming_content)) == json_lines(data)


def test_another_users_chat_pages_are_404(web, other_user):
    chat = ChatFactory(user=other_user)
    add_messages(chat, 3)
    for path in (
        f"/chats/{chat.pk}/",
        f"/chats/{chat.pk}/older/?before=2",
        f"/chats/{chat.pk}/messages/0/swipes/",
        f"/chats/{chat.pk}/export/",
    ):
        assert web.get(path).status_code == 404, path
    assert web.post(f"/chats/{chat.pk}/delete/").status_code == 404
    assert Chat.objects.filter(pk=chat.pk).exists()


def test_delete_from_the_page(web, user):
    chat = ChatFactory(user=user)
    assert web.post(f"/chats/{chat.pk}/delete/").url == "/chats/"
    assert not Chat.objects.exists()


def test_chat_list_pages_keep_the_search(web, user):
    for i in range(30):
        ChatFactory(user=user, title=f"Dragon tale {i}")
    first = web.get("/chats/?q=dragon").content.decode()
    assert "Page 1 of 2" in first and 'hx-get="?q=dragon&page=2"' in first
    second = web.get("/chats/?q=dragon&page=2", HTTP_HX_REQUEST="true").content.decode()
    assert "Page 2 of 2" in second and second.count("Dragon tale") == 5


def test_a_very_long_message_folds_on_the_chat_page_and_unfolds_whole(web, user):
    from apps.chats.services.chats import chat_create
    from apps.chats.services.writes import chat_append

    chat = chat_create(user=user, title="Epic")
    text = "\n\n".join(f"Paragraph {n}: the fog rolled over the ledger desk." for n in range(6000))  # 300,000+
    chat_append(chat=chat, messages=[{"name": "Mira", "is_user": False, "mes": text}], integrity=chat.integrity)

    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "Paragraph 10:" in page and "Paragraph 5999:" not in page and len(page) < 100_000
    assert "Show the whole message (" in page
    whole = web.get(f"/chats/{chat.pk}/messages/0/?full=1").content.decode()
    assert "Paragraph 5999:" in whole and "Show the whole message" not in whole
