"""Search inside a chat from its page: by words and by meaning, each answer a link to the chat opened there."""

from __future__ import annotations

from apps.chats.services.chats import chat_import
from apps.memories.services.settings import embedding_settings_set
from tests.memories.helpers import jsonl, message_memories

HX = {"HTTP_HX_REQUEST": "true"}


def search_url(chat) -> str:
    return f"/chats/{chat.pk}/search/"


def test_the_chat_page_offers_a_search_of_the_chat(web, indexed_chat):
    page = web.get(f"/chats/{indexed_chat.pk}/").content.decode()
    assert f'action="{search_url(indexed_chat)}"' in page and 'id="chat-search-results"' in page


def test_words_find_the_message_and_link_to_it_in_the_chat(web, indexed_chat):
    response = web.get(search_url(indexed_chat), {"q": "Corvin tower"}, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.strip().startswith('<div class="chat-search-results" id="chat-search-results"')
    first = body.index("<li>")
    assert f'href="/chats/{indexed_chat.pk}/?at=2">#2</a>' in body[first : first + 200]
    assert "match-words" in body[first : first + 300] and "Old Corvin climbed the tower" in body
    assert 'data-empties="#chat-search-results"' in body


def test_meaning_finds_a_message_sharing_no_word(web, indexed_chat, scripted):
    # The scripted embedder puts the question beside message #0 only; no word of it is in the chat.
    target = next(m for m in message_memories(indexed_chat) if m.message_index == 0)
    scripted.vectors["darkness fell"] = list(target.embedding)
    body = web.get(search_url(indexed_chat), {"q": "darkness fell"}, **HX).content.decode()
    assert f'href="/chats/{indexed_chat.pk}/?at=0">#0</a>' in body and "match-meaning" in body


def test_nothing_found_says_so(web, indexed_chat):
    body = web.get(search_url(indexed_chat), {"q": "zzzzqqq"}, **HX).content.decode()
    assert "No message of this chat matches “zzzzqqq”" in body and "<li>" not in body


def test_only_this_chats_messages_are_searched(web, user, indexed_chat, scripted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        other = chat_import(user=user, stream=jsonl(("Mira", "Corvin sailed away on the tower ship.")), title="Other")
    body = web.get(search_url(indexed_chat), {"q": "Corvin"}, **HX).content.decode()
    assert f"/chats/{indexed_chat.pk}/?at=2" in body and f"/chats/{other.pk}/" not in body


def test_an_empty_query_is_a_400_naming_the_box_and_the_page_works_without_javascript(web, indexed_chat):
    response = web.get(search_url(indexed_chat), {"q": "  "}, **HX)
    assert response.status_code == 400 and "This field is required." in response.content.decode()
    full = web.get(search_url(indexed_chat), {"q": "lantern"})
    assert full.status_code == 200 and "<h1>Search this chat</h1>" in full.content.decode()
    assert f"/chats/{indexed_chat.pk}/?at=0" in full.content.decode()


def test_another_users_chat_is_a_404(other_api, client, other_user, indexed_chat):
    client.force_login(other_user)
    assert client.get(search_url(indexed_chat), {"q": "lantern"}).status_code == 404


def test_signed_out_is_sent_to_sign_in(client, indexed_chat):
    response = client.get(search_url(indexed_chat), {"q": "lantern"})
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_with_embeddings_off_a_neighbouring_hit_is_not_labelled_meaning(web, user, indexed_chat, scripted):
    embedding_settings_set(user=user, provider="none")
    scripted.forget()  # the chat's own vectors, made when it was indexed
    body = web.get(search_url(indexed_chat), {"q": "Corvin tower"}, **HX).content.decode()
    hits = body[body.index('<ol class="plain search-hits">') :]
    assert f'href="/chats/{indexed_chat.pk}/?at=2">#2</a>' in hits and "match-words" in hits
    assert f'href="/chats/{indexed_chat.pk}/?at=3">#3</a>' in hits  # the turn after: by the neighbour spread
    assert "match-next-to-a-match" in hits and "meaning" not in hits
    assert scripted.requests == []  # no vector made: nothing can have been found by meaning


def test_a_hit_shows_its_message_as_the_chat_does_markdown_rendered_and_html_cleaned(
    web, user, scripted, django_capture_on_commit_callbacks
):
    text = '*Corvin bows low.* "The **tower** is yours." <script>alert(1)</script>'
    with django_capture_on_commit_callbacks(execute=True):
        chat = chat_import(user=user, stream=jsonl(("Mira", text)), title="Bow")
    body = web.get(search_url(chat), {"q": "Corvin tower"}, **HX).content.decode()
    hits = body[body.index('<ol class="plain search-hits">') :]
    assert "<em>Corvin bows low.</em>" in hits and "<strong>tower</strong>" in hits
    assert "*Corvin" not in hits and "<script>" not in hits
