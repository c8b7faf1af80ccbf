"""A character as a card again: Character Card V2 JSON, or a PNG carrying it as SillyTavern writes one (the card's
JSON, base64, in a `chara` tEXt chunk). Importing it (apps/chats/services/cards.py) gives the same character."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from typing import Any

from PIL import Image

from apps.chats.models import Character
from apps.chats.services.avatars import avatar_bytes
from apps.chats.services.characters import CHARACTER_FIELDS, card_body
from apps.chats.services.png import PNG_SIGNATURE, png_with_card

# What the character's own columns hold (edited on the character page): they win over the card as imported.
# Its additional lorebooks are not the card's: SillyTavern keeps them beside it, and a card carries none.
COLUMN_FIELDS = tuple(field for field in CHARACTER_FIELDS if field not in ("card_data", "extra_books"))
# The rest of a V2 card's fields, with the value a card without them gets.
CARD_DEFAULTS: dict[str, Any] = {
    "post_history_instructions": "",
    "alternate_greetings": [],
    "creator": "",
    "character_version": "",
    "extensions": {},
}
# A V1 card's own keys that SillyTavern moves into a V2 card's extensions.
V1_EXTENSIONS = ("talkativeness", "fav", "world", "depth_prompt")
PLACEHOLDER_SIZE = (400, 600)


def _v1_body(card: dict[str, Any]) -> dict[str, Any]:
    body = {key: card[key] for key in (*CARD_DEFAULTS, "character_book") if key in card}
    given = body.get("extensions")
    extensions = dict(given) if isinstance(given, dict) else {}
    extensions.update({key: card[key] for key in V1_EXTENSIONS if key in card and key not in extensions})
    if extensions:
        body["extensions"] = extensions
    return body


def card_v2(*, character: Character) -> dict[str, Any]:
    """The character as a Character Card V2: what the import kept in `card_data` (every field of its `data`,
    `character_book` when the card had one, fields this code does not know), under the character's fields as they
    are now."""
    card = character.card_data if isinstance(character.card_data, dict) else {}
    body = card_body(card) if isinstance(card.get("data"), dict) else _v1_body(card)
    data = {**CARD_DEFAULTS, **body}
    data.update({field: getattr(character, field) for field in COLUMN_FIELDS})
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def card_json_bytes(*, character: Character) -> bytes:
    """The V2 card as SillyTavern serialises it (`JSON.stringify`: compact, UTF-8)."""
    return json.dumps(card_v2(character=character), ensure_ascii=False, separators=(",", ":")).encode()


def placeholder_png(name: str) -> bytes:
    """A plain portrait-sized PNG in a colour of the name's own, for a character without an avatar."""
    digest = hashlib.sha256(name.encode()).digest()
    colour = tuple(80 + byte % 120 for byte in digest[:3])
    buffer = io.BytesIO()
    Image.new("RGB", PLACEHOLDER_SIZE, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _as_png(data: bytes) -> bytes:
    if data.startswith(PNG_SIGNATURE):
        return data
    with Image.open(io.BytesIO(data)) as image:
        buffer = io.BytesIO()
        image.convert("RGBA" if image.mode in ("RGBA", "LA", "P") else "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def card_png(*, character: Character) -> bytes:
    """The avatar (a JPEG or WebP one made a PNG), or a placeholder, carrying the V2 card in a `chara` chunk."""
    image = avatar_bytes(character)
    base = _as_png(image) if image else placeholder_png(character.name)
    return png_with_card(base, base64.b64encode(card_json_bytes(character=character)))
