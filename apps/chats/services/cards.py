"""Character cards as SillyTavern (and TavernAI before it) writes them: JSON, or a PNG carrying the JSON."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, BinaryIO

from django.contrib.auth.models import AbstractUser
from django.db import transaction

from apps.chats.models import Character
from apps.chats.services.avatars import MAX_AVATAR_BYTES, character_avatar_set
from apps.chats.services.characters import card_body, character_create
from apps.chats.services.png import PNG_SIGNATURE, png_text_chunks, png_without_card
from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import loads_strict, unstorable_reason

MAX_CARD_BYTES = 20 * 1024 * 1024
# The V3 chunk wins over V2's when a PNG carries both, as in SillyTavern.
PNG_CARD_KEYWORDS = (b"ccv3", b"chara")
TEXT_FIELDS = ("description", "personality", "scenario", "first_mes", "mes_example", "system_prompt", "creator_notes")
# TavernAI's original flat format.
TAVERNAI_FIELDS = {
    "char_name": "name",
    "char_persona": "description",
    "world_scenario": "scenario",
    "char_greeting": "first_mes",
    "example_dialogue": "mes_example",
}


def _card_error(problem: str) -> ApplicationError:
    return ApplicationError(f"Not a character card: {problem}.", {"field": "file", "problem": problem})


def card_parse(data: bytes) -> dict[str, Any]:
    """The card's JSON object, from a .json file or a PNG's `ccv3`/`chara` text chunk (base64 JSON)."""
    if data.startswith(PNG_SIGNATURE):
        chunks = png_text_chunks(data)
        raw = next((chunks[k] for k in PNG_CARD_KEYWORDS if k in chunks), None)
        if raw is None:
            raise _card_error("the PNG carries no character data (no 'chara' or 'ccv3' chunk)")
        try:
            data = base64.b64decode(raw, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise _card_error("the PNG's character data is not base64") from exc
    try:
        card = loads_strict(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _card_error("not JSON, and not a PNG") from exc
    if not isinstance(card, dict):
        raise _card_error("expected a JSON object")
    reason = unstorable_reason(card, json.dumps(card))
    if reason:
        raise _card_error(f"the card {reason}")
    return card


def card_fields(card: dict[str, Any]) -> dict[str, Any]:
    """Our Character fields from a V1, V2 or V3 card; the whole card is kept verbatim in `card_data`."""
    body = {TAVERNAI_FIELDS.get(key, key): value for key, value in card_body(card).items()}
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _card_error("it has no name")
    fields: dict[str, Any] = {"name": name.strip()[:200], "card_data": card}
    fields.update({key: body[key] for key in TEXT_FIELDS if isinstance(body.get(key), str)})
    if not fields.get("creator_notes") and isinstance(body.get("creatorcomment"), str):
        fields["creator_notes"] = body["creatorcomment"]
    tags = body.get("tags")
    if isinstance(tags, list):
        fields["tags"] = [tag[:100] for tag in tags if isinstance(tag, str)][:100]
    return fields


@transaction.atomic
def character_import_card(*, user: AbstractUser, stream: BinaryIO) -> Character:
    data = stream.read(MAX_CARD_BYTES + 1)
    if len(data) > MAX_CARD_BYTES:
        raise ApplicationError("The card is larger than 20 MB.", {"field": "file"}, status=413)
    character = character_create(user=user, **card_fields(card_parse(data)))
    if data.startswith(PNG_SIGNATURE):
        character = _keep_card_image(character, png_without_card(data))
    return character


def _keep_card_image(character: Character, image: bytes) -> Character:
    """A PNG card's picture becomes the character's avatar (without the character data, which the character
    holds), under the limits an uploaded avatar has. One that does not pass them is left out: the card's data is
    what was asked for."""
    if len(image) > MAX_AVATAR_BYTES:
        return character
    try:
        with transaction.atomic():  # a refused picture undoes only itself
            character_avatar_set(character=character, data=image)
    except ApplicationError:
        pass
    return character
