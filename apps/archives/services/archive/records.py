"""The lines of an account archive (apps/archives/services/archive/), checked with the API's own serializers before
anything of them is stored: a character with the sync API's character data, a memory with its memory data (both
apps/sync/apis/instances.py), an entity with the memory API's entity input, a chat's line with the chat import's
parameters, the settings with the sync API's settings data; each extended by what an archive line carries besides
(its uid, clock, references by uid). A line that does not fit is refused with the field and the reason."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rest_framework import serializers

from apps.archives.services.archive.format import ArchiveError
from apps.chats.apis.chats import ChatImportParamsSerializer
from apps.common.serializers import INT_MAX, DictField, MomentField, StorableInputSerializer
from apps.memories.apis.memories import EntityInputSerializer
from apps.sync.clocks import clock_problem
from apps.sync.records import CharacterDataSerializer, MemoryDataSerializer, SettingsDataSerializer


class _Clocked(serializers.Serializer):
    clock = DictField(required=False, default=dict)

    def validate_clock(self, value):
        problem = clock_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


# Where an archive keeps a character's picture (export.py `_avatar_write`).
AVATAR_MEMBER = r"^avatars/[0-9a-f-]{36}\.(png|jpg|webp)$"


class _Synced(_Clocked):
    changed_at = MomentField(required=False, allow_null=True, default=None)
    changed_by = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    source_instance = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    participating_instances = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=100, default=list
    )


class CharacterRecordSerializer(_Synced, CharacterDataSerializer):
    uid = serializers.UUIDField()
    avatar = serializers.RegexField(AVATAR_MEMBER, required=False, allow_null=True, default=None)

    class Meta:
        ref_name = None


class ChatRecordSerializer(StorableInputSerializer, ChatImportParamsSerializer):
    character_ids = None
    uid = serializers.UUIDField()
    integrity = serializers.UUIDField(required=False, allow_null=True)
    characters = serializers.ListField(child=serializers.UUIDField(), required=False, default=list)
    file = serializers.CharField(required=False, allow_null=True, max_length=1000)
    messages = serializers.IntegerField(required=False, min_value=0)
    created_at = MomentField(required=False, allow_null=True)

    class Meta:
        ref_name = None


class EntityRecordSerializer(EntityInputSerializer):
    # An entity gathers aliases over many memories: more than one request may name.
    aliases = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list)
    character = serializers.UUIDField(required=False, allow_null=True)

    class Meta:
        ref_name = None


class MemoryRecordSerializer(_Synced, MemoryDataSerializer):
    uid = serializers.UUIDField()
    chat = serializers.UUIDField(allow_null=True, required=False, help_text="The chat's uid.")
    valid_from = serializers.IntegerField(min_value=0, max_value=INT_MAX, allow_null=True, required=False)
    valid_to = serializers.IntegerField(min_value=0, max_value=INT_MAX, allow_null=True, required=False)
    created_at = MomentField(required=False, allow_null=True)
    origin = serializers.CharField(max_length=20, required=False, allow_blank=True)
    edited_by = serializers.CharField(max_length=64, required=False, allow_blank=True)
    source_message_indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=INT_MAX), required=False, default=list
    )
    contradicts = serializers.ListField(child=serializers.UUIDField(), required=False, default=list)

    class Meta:
        ref_name = None

    def validate(self, attrs):
        # The push API's rules for a new memory (a daily one's day, its owner) are a client's contract; an archive
        # holds memories made by every path, and the import checks what a memory belongs to against the archive.
        return StorableInputSerializer.validate(self, attrs)


class SettingsRecordSerializer(_Synced, SettingsDataSerializer):
    document = DictField(required=False, default=dict)

    class Meta:
        ref_name = None


class LorebookRecordSerializer(_Synced, StorableInputSerializer):
    uid = serializers.UUIDField()
    name = serializers.CharField(max_length=200)
    scope = serializers.ChoiceField(choices=["linked", "global"])
    extra = DictField(required=False, default=dict)
    created_at = MomentField(required=False, allow_null=True)
    updated_at = MomentField()
    entries = serializers.IntegerField(required=False, min_value=0)
    file = serializers.CharField(max_length=1000)

    class Meta:
        ref_name = None


class TombstoneRecordSerializer(StorableInputSerializer, _Clocked):
    type = serializers.CharField(max_length=20)
    uid = serializers.UUIDField()
    deleted_at = MomentField(required=False, allow_null=True)
    deleted_by = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")

    class Meta:
        ref_name = None


def _problems(errors: Any, path: str = "") -> Iterator[str]:
    if isinstance(errors, dict):
        for key, value in errors.items():
            yield from _problems(value, f"{path}.{key}" if path else str(key))
    elif isinstance(errors, list) and all(isinstance(error, str) for error in errors):
        for error in errors:
            yield f"{path}: {error}" if path and path != "non_field_errors" else str(error)
    elif isinstance(errors, list):
        for position, value in enumerate(errors):
            yield from _problems(value, f"{path}.{position}")


def record_check(serializer: type[serializers.Serializer], row: dict[str, Any], *, file: str, line: int) -> dict:
    """The line's validated fields, or ArchiveError naming the file, the line and every field that does not fit."""
    checked = serializer(data=row)
    if not checked.is_valid():
        raise ArchiveError("; ".join(_problems(checked.errors)), file=file, line=line)
    return dict(checked.validated_data)
