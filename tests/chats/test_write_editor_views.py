"""The chat view's editor: the page carries what the script needs, and the browser's path (session + CSRF) works."""

import json

import pytest
from django.test import Client

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_update
from tests.chats.helpers import exported, if_match

pytestmark = pytest.mark.django_db


def test_chat_page_carries_the_editor(web, chat):
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert f'data-integrity="{chat.integrity}"' in page and 'data-total="3"' in page
    assert f'data-api="/api/v1/chats/{chat.pk}/"' in page and "js/chat-edit.js" in page
    assert "Edit</button>" in page and "Delete from here" in page and 'id="metadata-form"' in page
    assert 'id="sync-notice"' in page


def test_metadata_in_the_editor_is_escaped(web, chat):
    chat_update(chat=chat, data={"chat_metadata": {"x": "</textarea><script>alert(1)</script>"}})
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;/textarea&gt;" in page


def test_message_fragment_and_swipe_choices(web, chat):
    fragment = web.get(f"/chats/{chat.pk}/messages/1/").content.decode()
    assert 'id="m1"' in fragment and "<html" not in fragment
    swipes = web.get(f"/chats/{chat.pk}/messages/0/swipes/").content.decode()
    assert swipes.count('class="link use-swipe"') == 2  # every swipe but the selected one


def test_the_browser_patches_with_its_session_and_csrf_token(user, chat):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    browser.get(f"/chats/{chat.pk}/")
    token = browser.cookies["csrftoken"].value
    ops = [
        {"op": "test", "path": "/1/mes", "value": exported(chat)[2]["mes"]},
        {"op": "replace", "path": "/1/mes", "value": "typed in the browser"},
    ]
    response = browser.post(
        f"/api/v1/chats/{chat.pk}/patch",
        json.dumps({"operations": ops}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
        **if_match(chat.integrity),
    )
    assert response.status_code == 200, response.content
    assert exported(chat)[2]["mes"] == "typed in the browser"
    without_csrf = browser.post(
        f"/api/v1/chats/{chat.pk}/patch",
        json.dumps({"operations": ops}),
        content_type="application/json",
        **if_match(response.json()["integrity"]),
    )
    assert without_csrf.status_code == 403
    assert Chat.objects.get(pk=chat.pk).integrity.hex == response.json()["integrity"].replace("-", "")


def test_the_fragment_of_another_users_message_is_404(web, other_user):
    from tests.chats.factories import ChatFactory, add_messages

    theirs = ChatFactory(user=other_user)
    add_messages(theirs, 2)
    assert web.get(f"/chats/{theirs.pk}/messages/0/").status_code == 404


def test_earlier_versions_are_listed_and_restored_from_the_page(web, api, chat):
    original = exported(chat)
    forced = api.post(
        f"/api/v1/chats/{chat.pk}/save",
        {"chat": [{"user_name": "x"}, {"mes": "overwritten"}], "force": True},
        format="json",
    )
    assert forced.status_code == 200
    page = web.get(f"/chats/{chat.pk}/").content.decode()
    assert "Earlier versions (1)" in page and "forced save" in page
    revision = chat.revisions.get()
    stale = web.post(f"/chats/{chat.pk}/revisions/{revision.pk}/restore/", {"integrity": str(chat.integrity)})
    assert stale.status_code == 302 and exported(chat)[1] == {"mes": "overwritten"}
    web.post(f"/chats/{chat.pk}/revisions/{revision.pk}/restore/", {"integrity": forced.json()["integrity"]})
    assert exported(chat) == original


def test_restoring_another_users_revision_is_404(web, other_user):
    from apps.chats.services.chats import chat_create

    theirs = chat_create(user=other_user, title="theirs")
    assert (
        web.post(f"/chats/{theirs.pk}/revisions/1/restore/", {"integrity": str(theirs.integrity)}).status_code == 404
    )


def test_settings_page_saves_and_refuses_a_stale_or_broken_document(web, user):
    from apps.accounts.services import settings_document_get

    page = web.get("/settings/")
    integrity = settings_document_get(user=user).integrity
    assert page.status_code == 200 and str(integrity) in page.content.decode()
    saved = web.post("/settings/", {"settings": '{"smartMemory": {"budget": 500}}', "integrity": str(integrity)})
    assert saved.status_code == 302 and settings_document_get(user=user).data == {"smartMemory": {"budget": 500}}
    stale = web.post("/settings/", {"settings": '{"x": {}}', "integrity": str(integrity)})
    assert stale.status_code == 400 and "changed by another client" in stale.content.decode()
    assert '{"x": {}}' in stale.content.decode().replace("&quot;", '"')  # the person's text is kept
    broken = web.post(
        "/settings/", {"settings": "{nope", "integrity": str(settings_document_get(user=user).integrity)}
    )
    assert broken.status_code == 400 and settings_document_get(user=user).data == {"smartMemory": {"budget": 500}}


def test_swiping_right_past_a_replys_last_swipe_offers_a_new_swipe(web, chat):
    """Message #0 is a reply on its first of three swipes, #1 the person's, #2 a reply with one swipe: › past the
    last swipe writes a new one (static/js/chat-compose.js), as SillyTavern does; the page's CSS shows it on the
    chat's last reply only."""
    first = web.get(f"/chats/{chat.pk}/messages/0/").content.decode()
    assert 'class="link swipe-next"' in first and "swipe-new" not in first  # swipes 2 and 3 to go
    last = web.get(f"/chats/{chat.pk}/messages/2/").content.decode()
    assert 'class="link swipe-next swipe-new"' in last and "swipe-prev" not in last
    person = web.get(f"/chats/{chat.pk}/messages/1/").content.decode()
    assert "swipe-nav" not in person and "swipe-new" not in person


def test_a_reply_on_its_last_swipe_offers_a_new_one(web, chat):
    Message.objects.filter(chat=chat, index=0).update(swipe_id=2)
    fragment = web.get(f"/chats/{chat.pk}/messages/0/").content.decode()
    assert "swipe 3 of 3" in fragment and 'class="link swipe-next swipe-new"' in fragment


def test_the_message_tools_are_one_menu_per_message(web, chat):
    fragment = web.get(f"/chats/{chat.pk}/messages/2/").content.decode()
    assert fragment.count('<details class="message-menu">') == 1
    menu = fragment.split('<details class="message-menu">')[1].split("</details>")[0]
    for tool in ("Regenerate", "Edit", "Branch from here", "Delete from here"):
        assert tool in menu
