"""A character's card, exported again: PNG (its avatar carrying the card, as SillyTavern writes one) or V2 JSON."""

from __future__ import annotations

import re

from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.services.card_export import card_json_bytes, card_png


def card_filename(name: str, suffix: str) -> str:
    safe = re.sub(r"[^\w\- .]+", "_", name).strip() or "character"
    return f"{safe[:120]}.{suffix}"


def card_response(body: bytes, content_type: str, filename: str) -> HttpResponse:
    # A plain answer, not DRF's: a browser asking for HTML (a download button) still gets the file.
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Cache-Control"] = "private, no-cache"
    return response


class CharacterCardPngApi(APIView):
    """The character as a SillyTavern PNG card: its avatar (or a plain placeholder) with the Character Card V2 JSON,
    base64, in a `chara` tEXt chunk. Importing it gives the same character."""

    @extend_schema(operation_id="characters_card_png", responses={(200, "image/png"): OpenApiTypes.BINARY})
    def get(self, request, character_id: int):
        character = selectors.character_get(user=request.user, character_id=character_id)
        return card_response(card_png(character=character), "image/png", card_filename(character.name, "png"))


class CharacterCardJsonApi(APIView):
    """The character as Character Card V2 JSON (`{"spec": "chara_card_v2", "spec_version": "2.0", "data": {…}}`):
    its fields as they are now, and whatever else the imported card held."""

    @extend_schema(operation_id="characters_card_json", responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request, character_id: int):
        character = selectors.character_get(user=request.user, character_id=character_id)
        body = card_json_bytes(character=character)
        return card_response(body, "application/json; charset=utf-8", card_filename(character.name, "json"))
