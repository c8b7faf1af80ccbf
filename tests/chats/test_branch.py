import pytest

from apps.chats.models import Chat
from apps.chats.selectors import chat_characters_in_order
from apps.chats.services.branch import chat_branch
from apps.chats.services.personas import persona_create
from apps.chats.services.start import chat_start
from apps.common.exceptions import ApplicationError
from tests.chats.factories import CharacterFactory
from tests.chats.helpers import exported, fresh

pytestmark = pytest.mark.django_db


def test_a_branch_holds_the_messages_up_to_the_index_exactly(user, chat):
    before = exported(chat)
    branch = chat_branch(chat=chat, index=1)
    header, *messages = exported(branch)
    assert messages == before[1:3]
    assert branch.title == "Seraphina (branch at #1)" and branch.message_count == 2
    assert list(branch.characters.all()) == list(chat.characters.all())
    metadata = {key: value for key, value in header["chat_metadata"].items() if key not in ("integrity", "main_chat")}
    assert metadata == {k: v for k, v in before[0]["chat_metadata"].items() if k != "integrity"}
    assert header["chat_metadata"]["main_chat"] == "Seraphina"
    assert header["chat_metadata"]["integrity"] != before[0]["chat_metadata"]["integrity"]
    assert {k: v for k, v in header.items() if k != "chat_metadata"} == {
        k: v for k, v in before[0].items() if k != "chat_metadata"
    }
    assert exported(chat) == before and fresh(chat).integrity == chat.integrity  # the chat itself is untouched


def test_a_branch_keeps_the_characters_order_persona_and_reply_order(user, character):
    ash = persona_create(user=user, name="Ash")
    bram = CharacterFactory(user=user, name="Bram", first_mes="Hello.")
    chat = chat_start(user=user, characters=[bram, character], persona=ash, reply_order="manual", title="Inn")
    branch = chat_branch(chat=chat, index=0)
    assert chat_characters_in_order(chat=branch) == [bram, character]
    assert (branch.persona, branch.reply_order, branch.user_name) == (ash, "manual", "Ash")


def test_a_branch_of_a_headerless_group_chat_gets_a_header(user, group_chat):
    header, first = exported(chat_branch(chat=group_chat, index=0))
    assert header["chat_metadata"]["main_chat"] == "Tavern" and first == exported(group_chat)[0]


@pytest.mark.parametrize("index", [-1, 3, 100])
def test_an_index_outside_the_chat_names_index_and_makes_nothing(user, chat, index):
    with pytest.raises(ApplicationError) as caught:
        chat_branch(chat=chat, index=index)
    assert caught.value.extra["field"] == "index" and Chat.objects.count() == 1


def test_branch_api(api, other_api, chat):
    url = f"/api/v1/chats/{chat.pk}/branch"
    response = api.post(url, {"index": 0}, format="json", HTTP_IDEMPOTENCY_KEY="branch-1")
    assert response.status_code == 201 and response.json()["total_messages"] == 1
    assert response["Location"] == f"/api/v1/chats/{response.json()['id']}/"
    assert api.post(url, {"index": 0}, format="json", HTTP_IDEMPOTENCY_KEY="branch-1").json() == response.json()
    for body in ({"index": 3}, {"index": -1}, {"index": "x"}, {}):
        bad = api.post(url, body, format="json")
        assert bad.status_code == 400 and "index" in bad.content.decode()
    assert other_api.post(url, {"index": 0}, format="json").status_code == 404
    assert Chat.objects.count() == 2


def test_branch_from_the_page_goes_to_the_new_chat(web, other_user, chat):
    response = web.post(f"/chats/{chat.pk}/branch/", {"index": 2})
    branch = Chat.objects.exclude(pk=chat.pk).get()
    assert response.url == f"/chats/{branch.pk}/" and branch.message_count == 3
    back = web.post(f"/chats/{chat.pk}/branch/", {"index": 9}, follow=True)
    assert "No branch made" in back.content.decode() and Chat.objects.count() == 2
    theirs = Chat.objects.create(user=other_user, title="Theirs")
    assert web.post(f"/chats/{theirs.pk}/branch/", {"index": 0}).status_code == 404


def test_the_page_names_the_message_branched_at_by_its_own_number(web, chat):
    answer = web.post(f"/chats/{chat.pk}/branch/", {"index": 1}, follow=True).content.decode()
    assert "at message #1." in answer and "at message 2" not in answer
