"""A character card's embedded lorebook (`character_book`) made one of the person's books, as SillyTavern offers when
it imports such a card: edited on the lorebooks page from then on, and linked by the card (`extensions.world`), so
its chats read the book rather than the card's copy."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.chats.models import Character
from apps.chats.services.characters import card_body, card_book, card_with_world, character_update
from apps.common.exceptions import ApplicationError
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import MAX_NAME, card_book_entries, lorebook_import


def _free_name(user: AbstractUser, name: str) -> str:
    """`name`, or "name (2)", "name (3)"… when a book of the person's has it."""
    taken = set(
        Lorebook.objects.filter(user=user, name__startswith=name[: MAX_NAME - 6]).values_list("name", flat=True)
    )
    number, free = 1, name
    while free in taken:
        number += 1
        free = f"{name[: MAX_NAME - len(str(number)) - 3]} ({number})"
    return free


@transaction.atomic
def card_book_import(*, user: AbstractUser, character: Character) -> tuple[Lorebook, int]:
    """The card's embedded book as a new book of the person's (a name taken gets a number), linked by the card; and
    how many entries it holds."""
    character = Character.objects.select_for_update().get(pk=character.pk, user=user)
    found = card_book(character)
    if found is None:
        raise ApplicationError("This character's card carries no lorebook to import.", {"field": "character"})
    entries = card_book_entries(card_body(character.card_data)["character_book"])
    data = {"entries": {str(entry["uid"]): entry for entry in entries}}
    # A book's name may hold no slash, and SillyTavern's file name drops its .json (lorebook_name_clean's rules).
    name = found[0].replace("/", "-").replace("\\", "-").strip().removesuffix(".json").strip()
    book = lorebook_import(
        user=user, name=_free_name(user, (name or f"{character.name}'s book")[:MAX_NAME]), data=data
    )
    character_update(character=character, data={"card_data": card_with_world(character.card_data, book.name)})
    return book, len(entries)
