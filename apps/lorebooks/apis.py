"""Lorebooks over the API: list, import a World Info file, read, rename or change scope, export, delete; and a
character's or chat's memories as a World Info file."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.chats import selectors as chat_selectors
from apps.chats.services.characters import MAX_BOOK_NAME, MAX_EXTRA_BOOKS
from apps.common.exceptions import ApplicationError
from apps.common.parsers import LimitedJSONParser
from apps.common.serializers import DictField
from apps.lorebooks import selectors
from apps.lorebooks.models import Lorebook, LorebookRevision
from apps.lorebooks.services.books import (
    IMPORT_REPLACED,
    MAX_NOT_GLOBAL,
    MAX_OWNERS,
    MAX_SENT,
    USES,
    chat_books_put,
    export_disposition,
    lorebook_delete,
    lorebook_export,
    lorebook_import,
    lorebook_revision_restore,
    lorebook_update,
)
from apps.lorebooks.services.fields import world_file_read
from apps.lorebooks.services.from_memories import memories_world


class LorebookOutputSerializer(serializers.ModelSerializer):
    entry_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Lorebook
        ref_name = "Lorebook"
        fields = ["id", "uid", "name", "scope", "entry_count", "created_at", "updated_at"]


class LorebookRevisionOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = LorebookRevision
        ref_name = "LorebookRevision"
        fields = ["id", "reason", "entry_count", "created_at"]


class LorebookImportInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, help_text="Default: the file's name.")
    data = DictField(required=False, help_text='The World Info file\'s JSON (`{"entries": {...}}`).')
    file = serializers.FileField(required=False, help_text="Multipart: the World Info file.")
    replace = serializers.BooleanField(
        required=False, default=False, help_text="Put it in place of a same-named book."
    )

    class Meta:
        ref_name = "LorebookImportInput"


class LorebookUpdateInputSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    scope = serializers.ChoiceField(choices=Lorebook.Scope.choices, required=False)

    class Meta:
        ref_name = "LorebookUpdateInput"


class ChatBookSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    data = DictField(help_text='The World Info file (`{"entries": {...}}`) as the client has it.')
    use = serializers.ChoiceField(
        choices=list(USES),
        help_text="How the chat uses it: `global` (active in every chat), `chat` (the chat's own lore), `character` "
        "(the book its character's card links), `extra` (one of its characters' additional books: `extra_books` "
        "says whose).",
    )
    characters = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=MAX_OWNERS,
        help_text="With `use` character: the names of the chat's characters whose book it is (a group's members "
        f"who link it). Without it, every character of the chat. At most {MAX_OWNERS}.",
    )

    class Meta:
        ref_name = "ChatLorebookInput"


class ChatExtraBooksSerializer(serializers.Serializer):
    character = serializers.CharField(max_length=200, help_text="The name of one of the chat's characters.")
    books = serializers.ListField(
        child=serializers.CharField(max_length=MAX_BOOK_NAME),
        max_length=MAX_EXTRA_BOOKS,
        help_text=f"Its additional books, by name, in order: exactly these (at most {MAX_EXTRA_BOOKS}).",
    )

    class Meta:
        ref_name = "ChatExtraLorebooksInput"


class ChatBooksInputSerializer(serializers.Serializer):
    books = ChatBookSerializer(many=True, max_length=MAX_SENT, help_text=f"At most {MAX_SENT}.")
    extra_books = ChatExtraBooksSerializer(
        many=True,
        required=False,
        max_length=MAX_OWNERS,
        help_text="The additional books of the chat's characters (SillyTavern's per-character Additional "
        f"Lorebooks), each character's whole list. At most {MAX_OWNERS} characters.",
    )
    not_global = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=MAX_NOT_GLOBAL,
        help_text="The client's other books, active in no chat unless linked: a global one of these names here "
        f"becomes linked, as on the client. At most {MAX_NOT_GLOBAL}.",
    )

    class Meta:
        ref_name = "ChatLorebooksInput"


class ChatBookOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    scope = serializers.CharField()
    use = serializers.CharField()

    class Meta:
        ref_name = "ChatLorebook"


class MemoriesWorldInputSerializer(serializers.Serializer):
    character_id = serializers.IntegerField(required=False, min_value=1)
    chat_id = serializers.IntegerField(required=False, min_value=1)

    class Meta:
        ref_name = "MemoriesWorldInput"

    def validate(self, attrs):
        if ("character_id" in attrs) == ("chat_id" in attrs):
            raise serializers.ValidationError({"character_id": "Give a character_id or a chat_id (one of them)."})
        return attrs


def attachment(data: dict, name: str) -> Response:
    response = Response(data)
    response["Content-Disposition"] = export_disposition(name)
    return response


class LorebookListApi(APIView):
    """Your lorebooks; POST imports a SillyTavern World Info file (JSON `{"name", "data"}`, or multipart `file`).
    One bad entry refuses the file: the answer names the entry and the field, and nothing is stored."""

    # The project's JSON parser: its size limit, NaN and 1e400 refused (jsonb holds neither), depth answered 400.
    parser_classes = [LimitedJSONParser, MultiPartParser]

    @extend_schema(operation_id="lorebooks_list", responses={200: LorebookOutputSerializer(many=True)})
    def get(self, request):
        books = selectors.lorebook_list(user=request.user)
        return Response(LorebookOutputSerializer(books, many=True).data)

    @extend_schema(
        operation_id="lorebooks_import",
        request={
            "application/json": LorebookImportInputSerializer,
            "multipart/form-data": LorebookImportInputSerializer,
        },
        responses={201: LorebookOutputSerializer},
    )
    def post(self, request):
        checked = LorebookImportInputSerializer(data=request.data)
        checked.is_valid(raise_exception=True)
        given = checked.validated_data
        upload, data, name = given.get("file"), given.get("data"), given.get("name")
        if upload is not None:
            data = world_file_read(upload)
            name = name or upload.name
        if data is None:
            raise ApplicationError("Send the World Info file as `data` or as the multipart `file`.", {"field": "data"})
        book = lorebook_import(user=request.user, name=name or data.get("name") or "", data=data,
                               replace=given["replace"], kept_as=IMPORT_REPLACED)  # fmt: skip
        book = selectors.lorebook_get(user=request.user, lorebook_id=book.pk)
        return Response(LorebookOutputSerializer(book).data, status=status.HTTP_201_CREATED)


class LorebookDetailApi(APIView):
    @extend_schema(operation_id="lorebooks_get", responses={200: LorebookOutputSerializer})
    def get(self, request, lorebook_id: int):
        book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
        return Response(LorebookOutputSerializer(book).data)

    @extend_schema(
        operation_id="lorebooks_update",
        request=LorebookUpdateInputSerializer,
        responses={200: LorebookOutputSerializer},
    )
    def patch(self, request, lorebook_id: int):
        book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
        checked = LorebookUpdateInputSerializer(data=request.data)
        checked.is_valid(raise_exception=True)
        book = lorebook_update(book=book, **checked.validated_data)
        return Response(LorebookOutputSerializer(selectors.lorebook_get(user=request.user, lorebook_id=book.pk)).data)

    @extend_schema(operation_id="lorebooks_delete", responses={204: None})
    def delete(self, request, lorebook_id: int):
        lorebook_delete(book=selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class LorebookExportApi(APIView):
    """The book as SillyTavern's World Info file (`worlds/<name>.json`), every key it was imported with."""

    @extend_schema(operation_id="lorebooks_export", responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request, lorebook_id: int):
        book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
        return attachment(lorebook_export(book=book), book.name)


class LorebookRevisionListApi(APIView):
    """The book's earlier versions, newest first: each kept when something replaced a version only this server held
    (SillyTavern's copy sent over an edit made here, a restore), the newest 20 of them (a list, not paged)."""

    @extend_schema(operation_id="lorebooks_revisions", responses={200: LorebookRevisionOutputSerializer(many=True)})
    def get(self, request, lorebook_id: int):
        book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
        revisions = selectors.lorebook_revisions(book=book)
        return Response(LorebookRevisionOutputSerializer(revisions, many=True).data)


class LorebookRevisionExportApi(APIView):
    """An earlier version as SillyTavern's World Info file."""

    @extend_schema(
        operation_id="lorebooks_revisions_export", responses={(200, "application/json"): OpenApiTypes.OBJECT}
    )
    def get(self, request, lorebook_id: int, revision_id: int):
        revision = selectors.lorebook_revision_get(user=request.user, lorebook_id=lorebook_id, revision_id=revision_id)
        return attachment(revision.data, revision.lorebook.name)


class LorebookRevisionRestoreApi(APIView):
    """The version's entries in place of the book's; the book as it was is kept as a version in turn. 409 when the
    book is already as the version has it."""

    @extend_schema(operation_id="lorebooks_revisions_restore", request=None, responses={200: LorebookOutputSerializer})
    def post(self, request, lorebook_id: int, revision_id: int):
        revision = selectors.lorebook_revision_get(user=request.user, lorebook_id=lorebook_id, revision_id=revision_id)
        book = lorebook_revision_restore(revision=revision)
        return Response(LorebookOutputSerializer(selectors.lorebook_get(user=request.user, lorebook_id=book.pk)).data)


class ChatLorebooksApi(APIView):
    """The books a client's open chat uses, sent as the client has them (the SillyTavern extension sends them as it
    sends the chat): each imported in place of the book of its name, a globally active one made global, a
    character's linked to the chat's characters, each character's additional books set as `extra_books` lists
    them; a global book the client no longer uses globally made linked
    (apps/lorebooks/services/books.py `chat_books_put`)."""

    @extend_schema(
        operation_id="chats_lorebooks_put",
        request=ChatBooksInputSerializer,
        responses={200: ChatBookOutputSerializer(many=True)},
    )
    def post(self, request, chat_id: int):
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
        given = request.data if isinstance(request.data, dict) else {}
        raw = given.get("books")
        lists = {name: given[name] for name in ("not_global", "extra_books") if name in given}
        checked = ChatBooksInputSerializer(data={"books": raw, **lists})
        checked.is_valid(raise_exception=True)
        done = chat_books_put(
            user=request.user,
            chat=chat,
            books=raw,
            not_global=checked.validated_data.get("not_global"),
            extra_books=checked.validated_data.get("extra_books"),
        )
        return Response([{"id": book.pk, "name": book.name, "scope": book.scope, "use": use} for book, use in done])


class MemoriesWorldApi(APIView):
    """A character's memories (its own and its chats') or a chat's (its own and its characters' persistent ones) as
    a World Info file SillyTavern loads as it is: one entry per active fact, relationship, scene, arc (and the like),
    keyed by the names and aliases of its entities; one without entities is `vectorized`."""

    @extend_schema(
        operation_id="lorebooks_from_memories",
        parameters=[
            OpenApiParameter("character_id", int, description="Export this character's memories."),
            OpenApiParameter("chat_id", int, description="Or this chat's."),
        ],
        responses={(200, "application/json"): OpenApiTypes.OBJECT},
    )
    def get(self, request):
        checked = MemoriesWorldInputSerializer(data=request.query_params)
        checked.is_valid(raise_exception=True)
        name, world = memories_world(user=request.user, **checked.validated_data)
        return attachment(world, name)
