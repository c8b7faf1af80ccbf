import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model

from apps.chats.models import Chat, Message
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    admin = get_user_model().objects.create_superuser(username="mod", password="moderator pass 1")
    client.force_login(admin)
    return client


@pytest.mark.parametrize(
    "path",
    [
        "/admin/auth/user/?q=alice",
        "/admin/accounts/apitoken/?q=x",
        "/admin/chats/character/?q=Bram",
        "/admin/chats/chat/?q=Tavern&has_header__exact=0",
        "/admin/chats/message/?q=Bram&is_user__exact=1",
        "/admin/memories/decision/?q=x&outcome__exact=rejected",
        "/admin/memories/lifecyclejob/?state__exact=failed",
        "/admin/memories/lifecyclesettings/",
        "/admin/memories/consolidationcounter/",
        "/admin/llm/connection/?q=x",
        "/admin/llm/call/?status__exact=error",
        "/admin/sync/instance/?q=laptop&kind__exact=phone",
        "/admin/sync/feedentry/?type__exact=memory&deleted_at__isempty=0",
        "/admin/archives/backup/?state__exact=failed",
        "/admin/archives/backupsettings/",
        "/admin/generation/generation/?q=alice&state__exact=stopped",
        "/admin/chats/persona/?q=x",
        "/admin/llm/samplerpreset/",
        "/admin/lorebooks/lorebook/?q=x&scope__exact=global",
        "/admin/lorebooks/lorebookentry/?q=x",
    ],
)
def test_admin_lists_with_search_and_filters(staff, group_chat, path):
    CharacterFactory(user=group_chat.user)
    assert staff.get(path).status_code == 200


def test_admin_sees_everyones_chat_and_its_messages(staff, group_chat):
    page = staff.get(f"/admin/chats/chat/{group_chat.pk}/change/").content.decode()
    assert "Another round!" in page


def test_token_admin_shows_no_secret(staff, user):
    from apps.accounts.services import api_token_create

    token, raw = api_token_create(user=user, name="laptop")
    page = staff.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    assert raw not in page and token.digest not in page and token.prefix in page


def test_deactivate_action_is_logged_and_stops_sign_in(staff, user):
    response = staff.post("/admin/auth/user/", {"action": "deactivate_users", "_selected_action": [user.pk]})
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.is_active is False
    assert LogEntry.objects.filter(object_id=str(user.pk), change_message__icontains="Deactivated").exists()


def test_delete_chat_action_is_logged_and_removes_messages(staff, group_chat):
    response = staff.post("/admin/chats/chat/", {"action": "delete_chats", "_selected_action": [group_chat.pk]})
    assert response.status_code == 302
    assert not Chat.objects.exists() and not Message.objects.exists()
    assert LogEntry.objects.filter(action_flag=DELETION, object_repr="Tavern").exists()


def test_deleting_a_message_in_the_admin_keeps_indices_contiguous(staff, group_chat):
    message = Message.objects.get(chat=group_chat, index=1)
    response = staff.post(f"/admin/chats/message/{message.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert list(Message.objects.filter(chat=group_chat).order_by("index").values_list("index", flat=True)) == [
        0,
        1,
        2,
        3,
    ]
    group_chat.refresh_from_db()
    assert group_chat.message_count == 4


def test_non_staff_cannot_open_the_admin(web):
    assert web.get("/admin/chats/chat/").status_code == 302
