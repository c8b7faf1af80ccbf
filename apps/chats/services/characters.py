from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.chats.models import Character
from apps.chats.signals import character_delete_preview, character_deleting
from apps.common.exceptions import ApplicationError
from apps.common.services import model_update

CHARACTER_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "system_prompt",
    "creator_notes",
    "tags",
    "card_data",
    "extra_books",
)
MAX_EXTRA_BOOKS = 50  # a character's additional lorebooks
MAX_BOOK_NAME = 200  # the name of one of them
# Card fields without a column of their own: kept in `card_data` (the `data` of a V2/V3 card, else the flat card),
# with the value a card without them has.
CARD_ONLY_FIELDS = {"alternate_greetings": list, "post_history_instructions": str}


def extra_books_clean(names: list[str]) -> list[str]:
    """A character's additional lorebooks as kept: each name trimmed, empty ones and repeats left out, in order."""
    return list(dict.fromkeys(name for name in (name.strip() for name in names) if name))  # a set's lookups


def card_body(card_data: Any) -> dict[str, Any]:
    """The fields of a card as imported: a V2/V3 card's `data`, or a V1 (flat) card itself."""
    if not isinstance(card_data, dict):
        return {}
    body = card_data.get("data")
    return body if isinstance(body, dict) else card_data


def card_extensions(card_data: Any) -> dict[str, Any]:
    """The card's `extensions` (SillyTavern's: `world`, `depth_prompt`, …), or an empty dict."""
    extensions = card_body(card_data).get("extensions")
    return extensions if isinstance(extensions, dict) else {}


def card_with_world(card_data: Any, world: str) -> dict[str, Any]:
    """`card_data` linked to the lorebook `world` (`extensions.world`), where the card keeps its fields."""
    body = {**card_body(card_data), "extensions": {**card_extensions(card_data), "world": world}}
    if isinstance(card_data, dict) and isinstance(card_data.get("data"), dict):
        return {**card_data, "data": body}
    return body


def card_book(character: Character) -> tuple[str, int] | None:
    """(its name, how many entries) of the lorebook the character's card carries (`character_book`) while it links
    none in its place (`extensions.world`, which SillyTavern then reads); None otherwise. A book without a name
    is the character's ("Mira's book"), as SillyTavern names it."""
    book = card_body(character.card_data).get("character_book")
    if card_extensions(character.card_data).get("world") or not isinstance(book, dict):
        return None
    entries = book.get("entries")
    if not isinstance(entries, list) or not entries:
        return None
    name = book.get("name") if isinstance(book.get("name"), str) else ""
    return name.strip() or f"{character.name}'s book", len(entries)


def character_greetings(character: Character) -> list[str]:
    """The character's greetings, raw (macros unresolved): the first message, then the card's alternate greetings.
    Empty ones are left out, as SillyTavern does (a card with only alternate greetings opens with the first)."""
    alternates = card_body(character.card_data).get("alternate_greetings")
    alternates = alternates if isinstance(alternates, list) else []
    return [text for text in [character.first_mes, *alternates] if isinstance(text, str) and text.strip()]


def character_post_history(character: Character) -> str:
    """The card's post-history instructions (sent after the chat history), "" when it has none."""
    text = card_body(character.card_data).get("post_history_instructions")
    return text if isinstance(text, str) else ""


def card_with(card_data: Any, changes: dict[str, Any]) -> Any:
    """`card_data` with the card-only fields in `changes` set where the card keeps its fields (a V2/V3 card's `data`,
    else the flat card). The card is left as it was, not merely equal, when nothing differs, so saving an untouched
    editor does not add empty fields to an imported card."""
    for field, value in changes.items():
        kind = CARD_ONLY_FIELDS[field]
        if not isinstance(value, kind) or (kind is list and not all(isinstance(item, str) for item in value)):
            raise ApplicationError(
                f"{field} must be {'a list of strings' if kind is list else 'a string'}.", {"field": field}
            )
    body = card_body(card_data)
    wanted = {field: value for field, value in changes.items() if body.get(field, CARD_ONLY_FIELDS[field]()) != value}
    if not wanted:
        return card_data
    card = dict(card_data) if isinstance(card_data, dict) else {}
    if isinstance(card.get("data"), dict):
        card["data"] = {**card["data"], **wanted}
    else:
        card.update(wanted)
    return card


def _card_changes(fields: dict[str, Any]) -> dict[str, Any]:
    return {field: fields.pop(field) for field in CARD_ONLY_FIELDS if field in fields}


@transaction.atomic
def character_create(*, user: AbstractUser, name: str, **fields: Any) -> Character:
    """A character; `alternate_greetings` and `post_history_instructions`, given, go into its card."""
    changes = _card_changes(fields)
    if changes:
        fields["card_data"] = card_with(fields.get("card_data", {}), changes)
    return Character.objects.create(user=user, name=name, **{k: v for k, v in fields.items() if k in CHARACTER_FIELDS})


@transaction.atomic
def character_update(*, character: Character, data: dict[str, Any]) -> Character:
    """The character's fields that `data` gives; `alternate_greetings` and `post_history_instructions` go into its
    card (the one `data` gives, else its own)."""
    data = dict(data)
    changes = _card_changes(data)
    if changes:
        data["card_data"] = card_with(data.get("card_data", character.card_data), changes)
    character, _ = model_update(instance=character, fields=list(CHARACTER_FIELDS), data=data)
    return character


def character_card_fields(character: Character) -> dict[str, Any]:
    """The card-only fields as the editor shows them: the alternate greetings and the post-history instructions."""
    alternates = card_body(character.card_data).get("alternate_greetings")
    alternates = [text for text in alternates if isinstance(text, str)] if isinstance(alternates, list) else []
    return {"alternate_greetings": alternates, "post_history_instructions": character_post_history(character)}


@transaction.atomic
def character_delete(*, character: Character, delete_chat_memories: bool = False) -> dict[str, int]:
    """Deleting a character keeps its chats (they simply lose that participant) and, unless `delete_chat_memories`,
    the memories drawn from them (the memories app does that, told through apps/chats/signals.py); its own other
    memories go with it. Answers
    `memories_deleted` and `memories_kept`.

    The character is locked first, so no memory naming it is committed between the count and the deletion."""
    character = Character.objects.select_for_update().get(pk=character.pk)
    counts = _counts(
        character_deleting,
        {"memories_deleted": 0, "memories_kept": 0},
        character=character,
        delete_chat_memories=delete_chat_memories,
    )
    avatar = character.avatar.name
    character.delete()
    if avatar:
        storage = character.avatar.storage
        transaction.on_commit(lambda: storage.delete(avatar))
    return counts


def character_delete_counts(*, character: Character) -> dict[str, int]:
    """What deleting the character would take: `own` memories go with it, `from_chats` are kept unless the person
    asks that they go too."""
    return _counts(character_delete_preview, {"own": 0, "from_chats": 0}, character=character)


def _counts(signal, counts: dict[str, int], **kwargs) -> dict[str, int]:
    """The receivers' counts added up (apps/chats/signals.py)."""
    for _receiver, answer in signal.send(sender=Character, **kwargs):
        for key, value in (answer or {}).items():
            counts[key] = counts.get(key, 0) + value
    return counts


def characters_for_names(*, user: AbstractUser, names: list[str]) -> list[Character]:
    """The user's characters with these names, creating those that do not exist yet (first match by name wins)."""
    wanted = [name for name in dict.fromkeys(n.strip()[:200] for n in names) if name]
    existing: dict[str, Character] = {}
    for character in Character.objects.filter(user=user, name__in=wanted).order_by("id"):
        existing.setdefault(character.name, character)
    missing = [Character(user=user, name=name) for name in wanted if name not in existing]
    for character in Character.objects.bulk_create(missing):
        existing[character.name] = character
    return [existing[name] for name in wanted]
