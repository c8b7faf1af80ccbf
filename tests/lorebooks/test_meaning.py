"""Vectorized entries activated by meaning, with memory search's relevance and its rule that nothing matches when
nothing is near (docs/LOREBOOKS.md, "Vectorized entries"), with the packaged local embedding model: a paraphrase
sharing no word activates its entry, an unrelated message activates none, a shared word is enough when no vector
can be made, and the Prompt page says why."""

from __future__ import annotations

import pytest

from apps.chats.services.chats import chat_create
from apps.chats.services.writes import chat_append
from apps.generation.services.generate import generation_prepare
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import entry_save, lorebook_import
from apps.lorebooks.services.meaning import entries_by_meaning
from tests.chats.factories import CharacterFactory

pytestmark = pytest.mark.django_db

FERRY = "The ferry fare is two silver coins, three after dark."
KRAKEN = "Nobody has seen the kraken in years."
ENTRIES = [
    ("Harbour", {"uid": 0, "key": [], "vectorized": True, "content": FERRY}),
    ("Harbour", {"uid": 1, "key": [], "vectorized": True, "content": KRAKEN}),
]


def test_a_paraphrase_sharing_no_word_activates_its_entry_by_meaning(user):
    found = entries_by_meaning(user=user, query="What is the price for the boat trip?", entries=ENTRIES)
    assert list(found) == [("Harbour", 0)]
    assert 0 < found[("Harbour", 0)] < 0.5  # meaning alone: at most half of relevance


def test_an_unrelated_message_activates_nothing(user):
    assert entries_by_meaning(user=user, query="I like apples and pears.", entries=ENTRIES) == {}
    assert entries_by_meaning(user=user, query="zzzzqqq xkcdwv", entries=ENTRIES) == {}  # no word the model reads


def test_with_embeddings_off_a_shared_word_is_enough(user, settings):
    settings.LOREKEEPER_EMBEDDINGS_PROVIDER = "none"
    assert entries_by_meaning(user=user, query="What is the price for the boat trip?", entries=ENTRIES) == {}
    found = entries_by_meaning(user=user, query="Has anyone seen a kraken lately?", entries=ENTRIES)
    assert list(found) == [("Harbour", 1)] and found[("Harbour", 1)] == pytest.approx(1.0)  # its one shared word


def test_the_web_chats_prompt_holds_the_entry_and_says_why(user, llm):
    book = lorebook_import(user=user, name="Harbour", data={"entries": {
        "0": {"uid": 0, "key": [], "vectorized": True, "content": FERRY, "comment": "Ferry", "position": 0},
        "1": {"uid": 1, "key": [], "vectorized": True, "content": KRAKEN, "comment": "Kraken", "position": 0},
        "2": {"uid": 2, "key": [], "content": "Never: no key, not vectorized.", "comment": "Keyless"},
    }})  # fmt: skip
    Lorebook.objects.filter(pk=book.pk).update(scope=Lorebook.Scope.GLOBAL)
    mira = CharacterFactory(user=user, name="Mira")
    chat = chat_create(user=user, title="Harbour", character_ids=[mira.pk], user_name="Rowan")
    chat = chat_append(chat=chat, messages=[{"name": "Mira", "mes": "The lantern is lit."}],
                       integrity=chat.integrity).chat  # fmt: skip
    generation = generation_prepare(user=user, chat=chat, message="What is the price for the boat trip?").generation
    assert FERRY in str(generation.prompt) and KRAKEN not in str(generation.prompt)
    assert "Never: no key" not in str(generation.prompt)
    [shown] = generation.prompt_info["lorebook"]["entries"]
    assert shown["comment"] == "Ferry" and shown["why"]["why"] == "meaning" and shown["why"]["relevance"] > 0


def test_past_the_most_compared_by_meaning_the_words_alone_decide(user, monkeypatch):
    from apps.lorebooks.services import meaning

    monkeypatch.setattr(meaning, "MEANING_MAX", 1)  # two entries here: no vector is made
    monkeypatch.setattr(meaning, "embed_texts", lambda *args: pytest.fail("an entry was embedded"))
    assert entries_by_meaning(user=user, query="What is the price for the boat trip?", entries=ENTRIES) == {}
    assert list(entries_by_meaning(user=user, query="The kraken?", entries=ENTRIES)) == [("Harbour", 1)]


def test_a_books_vectorized_entries_are_embedded_when_it_is_written(
    user, scripted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        book = lorebook_import(user=user, name="Harbour", data={"entries": {
            "0": {"uid": 0, "key": [], "vectorized": True, "content": FERRY},
            "1": {"uid": 1, "key": ["kraken"], "content": KRAKEN},  # found by its key: no vector needed
        }})  # fmt: skip
    assert scripted.embedded_texts() == [FERRY]
    scripted.forget()
    found = entries_by_meaning(user=user, query="What is the price for the boat trip?", entries=ENTRIES[:1])
    assert list(found) == [("Harbour", 0)]
    assert scripted.embedded_texts() == ["What is the price for the boat trip?"]  # the entry's vector was ready
    with django_capture_on_commit_callbacks(execute=True):
        entry_save(book=book, uid=1, changes={"vectorized": True})
    assert scripted.embedded_texts()[-1] == KRAKEN
    with django_capture_on_commit_callbacks(execute=True) as sent:
        entry_save(book=book, uid=1, changes={"vectorized": False, "content": "A kraken, not by meaning."})
    assert not sent  # an entry no longer vectorized asks for no vector
