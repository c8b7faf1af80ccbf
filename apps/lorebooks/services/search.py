"""Lorebook entries found beside memories on the memories page (docs/LOREBOOKS.md, "On the memories page"): the
entries of the books a character's or a chat's replies scan (all of your books on the page of all memories),
ranked by the relevance of memory search (services/meaning.py) to what was searched for, over each entry's title,
keys and content. Nothing is found when nothing shares a word or comes near in meaning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractUser

from apps.chats import selectors as chat_selectors
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.lore import Book, book_entries, chat_books
from apps.lorebooks.services.meaning import MEANING_MAX, entries_relevance
from apps.memories.search.text import excerpt


@dataclass
class EntryHit:
    book: str
    lorebook_id: int | None  # None: a book inside a character's card
    character_id: int | None  # the card's character, for a card's book
    uid: Any
    title: str
    excerpt: str
    relevance: float
    disabled: bool


@dataclass
class EntrySearch:
    hits: list[EntryHit]
    searched: int  # entries searched
    by_meaning: bool


def _books(user: AbstractUser, character_id: int | None, chat_id: int | None) -> list[tuple[Book, Any]]:
    """(book, the character whose card holds it or None) of the scope."""
    found: dict[tuple[str, bool], tuple[Book, Any]] = {}
    if chat_id is not None:
        chat = chat_selectors.chat_get(user=user, chat_id=chat_id)
        characters = list(chat.characters.all()) or [None]
        for character in characters:
            for book in chat_books(user=user, chat=chat, character=character)[0]:
                found.setdefault((book.name, book.card), (book, character))
    elif character_id is not None:
        character = chat_selectors.character_get(user=user, character_id=character_id)
        for book in chat_books(user=user, chat=None, character=character)[0]:
            found.setdefault((book.name, book.card), (book, character))
    else:
        for lorebook in Lorebook.objects.filter(user=user):
            found[(lorebook.name, False)] = (Book(lorebook.name, "global", book_entries(lorebook)), None)
    return list(found.values())


def _text(entry: dict[str, Any]) -> str:
    keys = ", ".join(str(key) for key in (*(entry.get("key") or []), *(entry.get("keysecondary") or [])))
    return "\n".join(part for part in (entry.get("comment") or "", keys, entry.get("content") or "") if part)


def lorebook_entries_search(
    *,
    user: AbstractUser,
    query: str,
    character_id: int | None = None,
    chat_id: int | None = None,
    limit: int = 20,
) -> EntrySearch:
    books = _books(user, character_id, chat_id)
    ids = dict(Lorebook.objects.filter(user=user).values_list("name", "id"))
    rows = [(book, character, entry) for book, character in books for entry in book.entries]
    texts = [_text(entry) for _, _, entry in rows]
    by_meaning = len(rows) <= MEANING_MAX
    relevance = entries_relevance(user=user, query=query, texts=texts, meaning=by_meaning)
    found = [(value, n) for n, value in enumerate(relevance) if value > 0]
    ranked = sorted(found, key=lambda item: (-round(item[0], 6), item[1]))  # highest first, ties in book order
    hits = []
    for value, n in ranked[:limit]:
        book, character, entry = rows[n]
        card = book.card
        hits.append(
            EntryHit(
                book=book.name,
                lorebook_id=None if card else ids.get(book.name),
                character_id=character.pk if card and character is not None else None,
                uid=entry.get("uid"),
                title=entry.get("comment") or ", ".join(entry.get("key") or []) or "(no title)",
                excerpt=excerpt(entry.get("content") or "", query),
                relevance=value,
                disabled=bool(entry.get("disable")),
            )  # fmt: skip
        )
    return EntrySearch(hits=hits, searched=len(rows), by_meaning=by_meaning)
