"""The book a chat links, chosen on its page (apps/lorebooks/views.py `chat_lore_view`, the chat panel's *Chat lore*):
a name of the person's books or none; a name they do not have refused naming the field, with the chat as it was; a
link a SillyTavern chat brought to a book not imported kept, and shown as such; another person's chat a 404."""

from __future__ import annotations

import pytest

from apps.chats.models import Chat
from apps.chats.services.chats import chat_create
from apps.lorebooks.services.books import lorebook_import
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

METADATA = {"note_prompt": "Rain.", "world_info": "From SillyTavern"}


@pytest.fixture
def chat(user):
    lorebook_import(user=user, name="Harbour", data={"entries": {}})
    chat = chat_create(user=user, title="Harbour", character_ids=[CharacterFactory(user=user, name="Mira").pk])
    Chat.objects.filter(pk=chat.pk).update(chat_metadata=METADATA)
    return Chat.objects.get(pk=chat.pk)


def test_the_form_offers_the_persons_books_and_keeps_a_link_to_one_not_imported(web, chat, other_user):
    lorebook_import(user=other_user, name="Secrets", data={"entries": {}})
    html = web.get(f"/lorebooks/chats/{chat.pk}/").content.decode()
    assert '<option value="Harbour">Harbour</option>' in html and "Secrets" not in html
    kept = '<option value="From SillyTavern" selected>From SillyTavern (not imported: nothing is read)</option>'
    assert kept in html


def test_a_book_is_linked_and_unlinked_the_rest_of_the_metadata_kept(web, chat):
    response = web.post(f"/lorebooks/chats/{chat.pk}/", {"book": "Harbour"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "Saved." in response.content.decode()
    assert Chat.objects.get(pk=chat.pk).chat_metadata == METADATA | {"world_info": "Harbour"}
    assert web.post(f"/lorebooks/chats/{chat.pk}/", {"book": ""}).status_code == 302  # without htmx: to the chat
    assert Chat.objects.get(pk=chat.pk).chat_metadata == {"note_prompt": "Rain."}


@pytest.mark.parametrize("name", ["Secrets", "harbour", "x" * 300])
def test_a_name_the_person_has_no_book_of_is_refused_naming_the_field(web, chat, other_user, name):
    lorebook_import(user=other_user, name="Secrets", data={"entries": {}})
    before = Chat.objects.filter(pk=chat.pk).values().get()
    response = web.post(f"/lorebooks/chats/{chat.pk}/", {"book": name}, headers={"HX-Request": "true"})
    assert response.status_code == 400 and 'class="field-error"' in response.content.decode()
    assert Chat.objects.filter(pk=chat.pk).values().get() == before


def test_another_persons_chat_is_a_404_and_keeps_its_metadata(client, other_user, chat):
    client.force_login(other_user)
    assert client.get(f"/lorebooks/chats/{chat.pk}/").status_code == 404
    assert client.post(f"/lorebooks/chats/{chat.pk}/", {"book": ""}).status_code == 404
    assert Chat.objects.get(pk=chat.pk).chat_metadata == METADATA
