"""Characters: CRUD and card import."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors
from apps.chats.services.cards import character_import_card
from apps.chats.services.characters import (
    MAX_BOOK_NAME,
    MAX_EXTRA_BOOKS,
    character_create,
    character_delete,
    character_update,
    extra_books_clean,
)
from apps.common.exceptions import ApplicationError
from apps.common.idempotency import idempotent
from apps.common.pagination import ListPagination
from apps.common.serializers import DictField, StorableInputSerializer, paginated, patch_checked


class CharacterOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    uid = serializers.UUIDField(help_text="Its id in multi-instance sync (memories name their character by it).")
    name = serializers.CharField()
    description = serializers.CharField()
    personality = serializers.CharField()
    scenario = serializers.CharField()
    first_mes = serializers.CharField()
    mes_example = serializers.CharField()
    system_prompt = serializers.CharField()
    creator_notes = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    card_data = serializers.DictField()
    extra_books = serializers.ListField(
        child=serializers.CharField(), help_text="Its additional lorebooks, by name (SillyTavern's charLore)."
    )
    avatar = serializers.SerializerMethodField(
        help_text="Where its avatar is served (to its owner, signed in), or null when it has none."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_avatar(self, character) -> str | None:
        return reverse("chats:character-avatar", args=[character.pk]) if character.avatar else None


class CharacterInputSerializer(StorableInputSerializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    personality = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    scenario = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    first_mes = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    mes_example = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    system_prompt = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    creator_notes = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=100)
    card_data = DictField(required=False, help_text="Any other card data, kept verbatim.")
    extra_books = serializers.ListField(
        child=serializers.CharField(max_length=MAX_BOOK_NAME),
        required=False,
        max_length=MAX_EXTRA_BOOKS,
        help_text="Its additional lorebooks, by name, scanned with the book its card links (SillyTavern's "
        f"per-character Additional Lorebooks). At most {MAX_EXTRA_BOOKS}.",
    )

    def validate_extra_books(self, value: list[str]) -> list[str]:
        return extra_books_clean(value)


class CharacterListApi(APIView):
    @extend_schema(
        operation_id="characters_list",
        parameters=[OpenApiParameter("search", str, description="Filter by name (case-insensitive substring).")],
        responses=paginated(CharacterOutputSerializer),
    )
    def get(self, request):
        paginator = ListPagination()
        qs = selectors.character_list(user=request.user, search=request.query_params.get("search", ""))
        # The cursor pagination orders by id, newest first.
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(CharacterOutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="characters_create", request=CharacterInputSerializer, responses={201: CharacterOutputSerializer}
    )
    @idempotent
    def post(self, request):
        serializer = CharacterInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        character = character_create(user=request.user, **serializer.validated_data)
        return Response(CharacterOutputSerializer(character).data, status=status.HTTP_201_CREATED)


class CharacterDeleteOutputSerializer(serializers.Serializer):
    memories_deleted = serializers.IntegerField(help_text="Memories deleted with the character.")
    memories_kept = serializers.IntegerField(help_text="Memories drawn from its chats, kept and moved to them.")

    class Meta:
        ref_name = "CharacterDeleteOutput"


class CharacterDetailApi(APIView):
    @extend_schema(operation_id="characters_retrieve", responses=CharacterOutputSerializer)
    def get(self, request, character_id: int):
        character = selectors.character_get(user=request.user, character_id=character_id)
        return Response(CharacterOutputSerializer(character).data)

    @extend_schema(
        operation_id="characters_update", request=CharacterInputSerializer, responses=CharacterOutputSerializer
    )
    @idempotent
    def patch(self, request, character_id: int):
        character = selectors.character_get(user=request.user, character_id=character_id)
        serializer = patch_checked(
            CharacterInputSerializer, request.data, answered=CharacterOutputSerializer(character).data
        )
        character = character_update(character=character, data=serializer.validated_data)
        return Response(CharacterOutputSerializer(character).data)

    @extend_schema(
        operation_id="characters_destroy",
        parameters=[
            OpenApiParameter(
                "memories",
                str,
                enum=["keep", "delete"],
                description="`keep` (the default): the memories a chat taught the character or holds stay, moved "
                "to that chat; `delete`: they go with the character. Its other memories go either way.",
            )
        ],
        responses=CharacterDeleteOutputSerializer,
    )
    @idempotent
    def delete(self, request, character_id: int):
        choice = request.query_params.get("memories", "keep")
        if choice not in ("keep", "delete"):
            raise ApplicationError("`memories` is `keep` or `delete`.", {"field": "memories"})
        character = selectors.character_get(user=request.user, character_id=character_id)
        counts = character_delete(character=character, delete_chat_memories=choice == "delete")
        return Response(CharacterDeleteOutputSerializer(counts).data)


class CharacterCardImportInputSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A character card: SillyTavern PNG, or V1/V2/V3 JSON.")


class CharacterImportApi(APIView):
    """Import a character card; the whole card is kept verbatim in `card_data`."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="characters_import",
        request={"multipart/form-data": CharacterCardImportInputSerializer},
        responses={201: CharacterOutputSerializer},
    )
    @idempotent
    def post(self, request):
        serializer = CharacterCardImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        character = character_import_card(user=request.user, stream=serializer.validated_data["file"])
        return Response(CharacterOutputSerializer(character).data, status=status.HTTP_201_CREATED)
