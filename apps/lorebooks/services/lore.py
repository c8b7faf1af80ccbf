"""The books a chat scans and the scan of a chat (docs/LOREBOOKS.md): what the prompt of a reply asks for."""

from __future__ import annotations

import copy
import random
import threading
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractUser

from apps.chats.models import Character, Chat, Message
from apps.chats.services.characters import card_body, card_extensions
from apps.common.exceptions import ApplicationError
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import card_book_entries
from apps.lorebooks.services.fields import MAX_SCAN_DEPTH, POSITION_LABELS
from apps.lorebooks.services.meaning import entries_by_meaning
from apps.lorebooks.services.scan import Activation, Book, Scanned, decorators_parse, entry_hash, scan
from apps.lorebooks.services.settings import lore_settings_get

_cache: dict[int, tuple[Any, list[dict[str, Any]]]] = {}
_cache_lock = threading.Lock()
CACHE_BOOKS = 256


def book_entries(book: Lorebook) -> list[dict[str, Any]]:
    """The book's entries as the scan reads them, each with its hash, kept per process until the book changes
    (`updated_at`): a context build reads a 500-entry book without a query for its entries."""
    with _cache_lock:
        cached = _cache.get(book.id)
    if cached is not None and cached[0] == book.updated_at:
        return cached[1]
    entries = [_prepared(entry.data) for entry in book.entries.order_by("uid")]
    with _cache_lock:
        if len(_cache) >= CACHE_BOOKS:
            _cache.pop(next(iter(_cache)))
        _cache[book.id] = (book.updated_at, entries)
    return entries


def _prepared(data: dict[str, Any]) -> dict[str, Any]:
    entry = dict(data)
    entry["hash"] = entry_hash(entry)
    entry["decorators"], entry["content"] = decorators_parse(entry.get("content") or "")
    return entry


def chat_books(*, user: AbstractUser, chat: Chat | None, character: Character | None) -> tuple[list[Book], list[str]]:
    """The books a chat scans, as SillyTavern gathers them: the account's global books, the book the chat links
    (`chat_metadata.world_info`), its persona's (SillyTavern's persona lore), and the character's (the book its card
    links in `extensions.world`, else the book embedded in the card, then its additional books). A book is read
    once, in the first of global, chat, persona, character. Without `chat`, the books a character's chats scan.
    Answers the books and what could not be read (a link to a missing book, a card book that does not pass the
    checks)."""
    problems: list[str] = []
    owned = {book.name: book for book in Lorebook.objects.filter(user=user)}
    books: list[Book] = []
    used: set[str] = set()
    for book in owned.values():
        if book.scope == Lorebook.Scope.GLOBAL:
            books.append(Book(book.name, "global", book_entries(book)))
            used.add(book.name)

    def read(kind: str, name: Any) -> None:
        if not isinstance(name, str) or not name or name in used:
            return
        used.add(name)
        if name in owned:
            books.append(Book(name, kind, book_entries(owned[name])))
        else:
            problems.append(f"The {kind} links the lorebook {name!r}, which you have not imported.")

    read("chat", ((chat.chat_metadata if chat is not None else None) or {}).get("world_info"))
    persona = chat.persona if chat is not None and chat.persona_id else None
    read("persona", persona.lorebook if persona is not None else "")
    card = character.card_data if character is not None else None
    body, extensions = card_body(card), card_extensions(card)
    read("character", extensions.get("world"))
    if not extensions.get("world") and body.get("character_book") and character is not None:
        books.extend(_card_book(character, body["character_book"], problems))
    # Then its additional books: SillyTavern reads them after the card's own.
    for name in character.extra_books if character is not None and isinstance(character.extra_books, list) else []:
        read("character", name)
    return books, problems


def _card_book(character: Character, card_book: Any, problems: list[str]) -> list[Book]:
    """The book embedded in the card, when the card links none: its entries, or a problem said."""
    try:
        entries = [_prepared(entry) for entry in card_book_entries(card_book)]
    except ApplicationError as error:
        problems.append(f"{character.name}'s card book was left out: {error.message}")
        return []
    name = (card_book.get("name") or f"{character.name}'s book") if entries else ""
    return [Book(str(name), "character", entries, card=True)]


TRIGGERS = {"new": "normal", "swipe": "swipe", "continue": "continue", "impersonate": "impersonate"}


def chat_lore(
    *,
    chat: Chat,
    character: Character | None,
    names: tuple[str, str],
    persona: str,
    max_context: int,
    count_tokens: Callable[[str], int],
    resolve: Callable[[str], str],
    mode: str = "new",
    dry_run: bool = False,
    rng: random.Random | None = None,
) -> tuple[Activation | None, dict[str, Any]]:
    """The World Info a reply's prompt holds, scanned over the chat as SillyTavern scans it: its newest messages
    the model sees ("Name: text"), newest first, without the reply being redone in a swipe. Answers the activation
    (None when the chat uses no book) and what the Prompt page shows of it. The timed effects are read from the
    chat's metadata and, unless `dry_run`, written back there (`timed_effects_keep`)."""
    books, problems = chat_books(user=chat.user, chat=chat, character=character)
    if not any(book.entries for book in books):
        return None, {"problems": problems} if problems else {}
    settings = lore_settings_get(user=chat.user)
    depth = max([settings.depth] + [int(e["scanDepth"]) for b in books for e in b.entries if e.get("scanDepth")])
    before = chat.message_count - 1 if mode == "swipe" else chat.message_count
    seen = Message.objects.filter(chat=chat, index__lt=before, is_system=False)
    newest = list(seen.order_by("-index").values_list("name", "mes")[: min(depth, MAX_SCAN_DEPTH)])
    lines = [f"{name}: {mes}" if settings.include_names else mes for name, mes in newest]
    depth_prompt = card_extensions(character.card_data if character is not None else None).get("depth_prompt")
    kept = (chat.chat_metadata or {}).get("timedWorldInfo")
    kept = kept if isinstance(kept, dict) else {}  # a client's metadata may hold anything there
    timed = copy.deepcopy(kept)
    vectorized = [(book.name, entry) for book in books for entry in book.entries
                  if entry.get("vectorized") and not entry.get("disable")]  # fmt: skip
    # the newest messages, the newest first: a query is cut at five sentences, and those of the person's message are
    # the ones its recall has embedded already
    query = "\n".join(mes for _, mes in newest[: settings.depth])
    meaning = entries_by_meaning(user=chat.user, query=query, entries=vectorized) if vectorized else {}
    scanned = Scanned(
        messages=lines, settings=settings, max_context=max_context, count_tokens=count_tokens, resolve=resolve,
        trigger=TRIGGERS.get(mode, "normal"), timed=timed, dry_run=dry_run, length=_length(seen, books, timed, lines),
        rng=rng or random.Random(), meaning=meaning,
        character=names[0], character_tags=tuple(character.tags or []) if character is not None else (),
        globals={
            "personaDescription": persona,
            "characterDescription": character.description if character else "",
            "characterPersonality": character.personality if character else "",
            "characterDepthPrompt": depth_prompt.get("prompt", "") if isinstance(depth_prompt, dict) else "",
            "scenario": character.scenario if character else "",
            "creatorNotes": character.creator_notes if character else "",
        },
    )  # fmt: skip
    activation = scan(books, scanned)
    info = {
        "entries": [_shown(entry) for entry in activation.entries],
        "budget": activation.budget,
        "overflowed": activation.overflowed,
        "books": [book.name for book in books],
        "regex_ms": round((activation.regex.spent + activation.told.spent) * 1000, 2),
        "regex_timed_out": activation.regex.timed_out,
        "regex_exhausted": activation.regex.exhausted,
    }
    if problems:
        info["problems"] = problems
    activation.timed_changed = timed != kept
    activation.timed_state = timed
    return activation, info


def _length(seen, books: list[Book], timed: dict[str, Any], lines: list[str]) -> int:
    """The chat's length as timed effects count it (the messages the model sees): a count over the whole chat, made
    only when an entry or the chat's metadata has a timed effect."""
    if (
        timed.get("sticky")
        or timed.get("cooldown")
        or any(
            entry.get("sticky") or entry.get("cooldown") or entry.get("delay")
            for book in books
            for entry in book.entries
        )
    ):
        return seen.count()
    return len(lines)


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "world": entry["world"],
        "uid": entry["uid"],
        "comment": entry.get("comment") or ", ".join(entry.get("key") or []),
        # an entry saved without a position is activated and placed nowhere, as in SillyTavern (docs/LOREBOOKS.md)
        "position": POSITION_LABELS.get(entry.get("position"), "placed nowhere (the entry has no position)"),
        "depth": entry.get("depth") if entry.get("position") == 4 else None,
        "why": entry.get("why") or {},
    }
