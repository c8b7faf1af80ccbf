"""The shapes of the objects multi-device sync carries (memories, characters, lorebooks, the settings document),
validated the same way wherever they come from: a push (apps/sync/apis/instances.py) or an archive
(apps/archives/services/archive/records.py)."""

from __future__ import annotations

from rest_framework import serializers

from apps.chats.apis.characters import CharacterInputSerializer
from apps.common.exceptions import ApplicationError
from apps.common.serializers import INT_MAX, DictField, MomentField, StorableInputSerializer
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import MAX_NAME, lorebook_name_clean
from apps.lorebooks.services.fields import entries_clean
from apps.memories.apis import memories as memory_apis
from apps.memories.apis.memories import MAX_ENTITIES, WRITABLE_KINDS
from apps.memories.models import Kind, Status
from apps.sync.models import FeedType


class EntityInputSerializer(memory_apis.EntityInputSerializer):
    """An entity as the memory API takes it (one set of rules); its own name in the schema."""

    class Meta:
        ref_name = "SyncEntityInput"


class MemoryDataSerializer(StorableInputSerializer):
    kind = serializers.ChoiceField(WRITABLE_KINDS)
    content = serializers.CharField(max_length=100_000)
    data = DictField(required=False)
    importance = serializers.IntegerField(min_value=1, max_value=3, required=False)
    confidence = serializers.FloatField(min_value=0, max_value=1, required=False)
    time_scope = serializers.ChoiceField(["", "scene", "session", "permanent"], required=False)
    valid_from = serializers.IntegerField(min_value=0, max_value=INT_MAX, allow_null=True, required=False)
    valid_to = serializers.IntegerField(min_value=0, max_value=INT_MAX, allow_null=True, required=False)
    status = serializers.ChoiceField(Status.choices, required=False)
    retired_reason = serializers.CharField(max_length=50, allow_blank=True, required=False)
    occurred_at = MomentField(allow_null=True, required=False)
    character = serializers.UUIDField(allow_null=True, required=False, help_text="The character's uid.")
    chat = serializers.IntegerField(allow_null=True, required=False, help_text="The chat's id.")
    superseded_by = serializers.UUIDField(allow_null=True, required=False, help_text="The memory's uid.")
    entities = EntityInputSerializer(many=True, required=False, max_length=MAX_ENTITIES)
    participating_instances = serializers.ListField(
        child=serializers.CharField(max_length=100), required=False, max_length=100
    )
    date = serializers.DateField(required=False, help_text="A daily memory's day (its data.period).")

    class Meta:
        ref_name = "SyncMemoryData"

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if not self.partial:
            if attrs.get("character") is None and attrs.get("chat") is None:
                raise serializers.ValidationError({"character": ["A memory belongs to a character or to a chat."]})
        if "date" in attrs:
            attrs["date"] = attrs["date"].isoformat()
        if not self.partial and attrs.get("kind") == Kind.DAILY:
            if attrs.get("character") is None:
                raise serializers.ValidationError({"character": ["A daily memory belongs to a character."]})
            if "date" not in attrs and not isinstance((attrs.get("data") or {}).get("period"), str):
                raise serializers.ValidationError({"date": ["A daily memory needs its day."]})
        return attrs


class CharacterDataSerializer(CharacterInputSerializer):
    """A character as the character API takes it (one set of rules), except that it may carry more and longer
    tags: a synced character holds what a SillyTavern card on another device had."""

    tags = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=200)

    class Meta:
        ref_name = "SyncCharacterData"


class SettingsDataSerializer(StorableInputSerializer):
    document = DictField(help_text="The whole settings document: one object per extension namespace.")

    class Meta:
        ref_name = "SyncSettingsData"

    def validate_document(self, value):
        if not all(isinstance(v, dict) for v in value.values()):
            raise serializers.ValidationError("Each namespace of the settings document is an object.")
        return value


class LorebookDataSerializer(StorableInputSerializer):
    """A lorebook whole: its name, scope and World Info file, every entry checked as an import checks it."""

    name = serializers.CharField(max_length=MAX_NAME)
    scope = serializers.ChoiceField(Lorebook.Scope.choices, required=False)
    book = DictField(help_text="The World Info file: `{entries: {uid: entry}, ...}`, as SillyTavern saves it.")

    class Meta:
        ref_name = "SyncLorebookData"

    def validate_name(self, value):
        try:
            return lorebook_name_clean(value)
        except ApplicationError as error:
            raise serializers.ValidationError(error.message) from None

    def validate_book(self, value):
        if "entries" not in value:
            raise serializers.ValidationError("A World Info file is an object with `entries`.")
        try:
            value["entries"] = {str(entry["uid"]): entry for entry in entries_clean(value["entries"])}
        except ApplicationError as error:
            raise serializers.ValidationError(error.message) from None
        return value


DATA_SERIALIZERS = {
    FeedType.MEMORY: MemoryDataSerializer,
    FeedType.CHARACTER: CharacterDataSerializer,
    FeedType.SETTINGS: SettingsDataSerializer,
    FeedType.LOREBOOK: LorebookDataSerializer,
}
