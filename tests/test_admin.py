from html.parser import HTMLParser

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model

from apps.chats.models import Chat, Message
from apps.chats.services.personas import persona_create
from apps.memories.models import Entity
from apps.memories.services.memories import memory_create
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


class _Form(HTMLParser):
    """The fields of a page's form as a browser would post them: inputs, textareas, and selected options."""

    def __init__(self):
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self._select = self._textarea = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        name = attrs.get("name")
        if tag == "input" and name and attrs.get("type") not in ("submit", "button", "file"):
            if attrs.get("type") not in ("checkbox", "radio") or "checked" in attrs:
                self.data.setdefault(name, []).append(attrs.get("value", "on" if "checked" in attrs else ""))
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in attrs:
            self.data[self._select].append(attrs.get("value", ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = [""]

    def handle_data(self, data):
        if self._textarea:
            self.data[self._textarea][0] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def test_a_chat_in_the_admin_links_only_its_own_users_characters_and_persona(staff, group_chat, other_user):
    theirs = CharacterFactory(user=other_user, name="Bram")  # the same name as one of the chat's own
    their_persona = persona_create(user=other_user, name="Ash")
    url = f"/admin/chats/chat/{group_chat.pk}/change/"
    page = staff.get(url).content.decode()
    assert f'<option value="{theirs.pk}"' not in page  # not offered beside the chat's own "Bram"
    form = _Form()
    form.feed(page)
    before = (list(group_chat.characters.values_list("pk", flat=True)), group_chat.persona_id)
    form.data["characters"] = [*map(str, before[0]), str(theirs.pk)]
    form.data["persona"] = [str(their_persona.pk)]

    response = staff.post(url, form.data)

    assert response.status_code == 200  # the form again, with its errors
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"characters", "persona"}, errors
    chat = Chat.objects.get(pk=group_chat.pk)
    assert (list(chat.characters.values_list("pk", flat=True)), chat.persona_id) == before
    # The same page posted as it was saves: the check refuses only another account's objects.
    form.data["characters"], form.data["persona"] = list(map(str, before[0])), [""]
    assert staff.post(url, form.data).status_code == 302


def test_a_memorys_and_an_entitys_admin_pages_open_and_refuse_another_accounts_links(staff, user, other_user):
    mira = CharacterFactory(user=user, name="Mira")
    memory = memory_create(user=user, kind="fact", content="Mira keeps the lantern.", character=mira)
    entity = Entity.objects.create(user=user, name="Lantern", type="item")
    theirs = Entity.objects.create(user=other_user, name="Lantern", type="item")
    assert staff.get(f"/admin/memories/memory/{memory.pk}/change/").status_code == 200
    url = f"/admin/memories/entity/{entity.pk}/change/"
    form = _Form()
    form.feed(staff.get(url).content.decode())
    form.data["character"] = [str(CharacterFactory(user=other_user).pk)]
    response = staff.post(url, form.data)
    assert response.status_code == 200 and set(response.context["adminform"].form.errors) == {"character"}
    assert Entity.objects.get(pk=entity.pk).character_id is None and theirs.user_id == other_user.pk
