"""Multi-instance sync over the API: instances, pull, push, status (the rules: apps/sync/services/push/)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.serializers import BIGINT_MAX, DictField, MomentField
from apps.sync import selectors
from apps.sync.clocks import clock_problem
from apps.sync.models import FeedType, InstanceKind
from apps.sync.records import DATA_SERIALIZERS
from apps.sync.services.feed import MAX_PULL_LIMIT, PULL_LIMIT, sync_pull
from apps.sync.services.instances import instance_key_check, instance_register, instance_remove, instance_update
from apps.sync.services.push.apply import sync_push
from apps.sync.services.push.changes import (
    MAX_CHANGES,
    MAX_PUSH_ENTITIES,
    MAX_PUSH_LOREBOOK_ENTRIES,
    Change,
    push_entities,
    push_lorebook_entries,
)

OPS = ("create", "update", "edit", "delete")


class InstanceOutputSerializer(serializers.Serializer):
    key = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField()
    priority = serializers.IntegerField()
    cursor = serializers.IntegerField(source="pulled_seq", help_text="How far it has pulled the feed.")
    pulled_items = serializers.IntegerField()
    pushed_items = serializers.IntegerField()
    last_pull_at = serializers.DateTimeField(allow_null=True)
    last_push_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "SyncInstance"


class InstanceInputSerializer(serializers.Serializer):
    key = serializers.CharField(max_length=64, help_text="The id the client uses in clocks and [via:…] tags.")
    name = serializers.CharField(max_length=100, required=False)
    kind = serializers.ChoiceField(InstanceKind.choices, required=False)
    priority = serializers.IntegerField(required=False, help_text="Breaks last-write-wins ties: the higher wins.")

    class Meta:
        ref_name = "SyncInstanceInput"


class InstanceUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    kind = serializers.ChoiceField(InstanceKind.choices, required=False)
    priority = serializers.IntegerField(required=False)

    class Meta:
        ref_name = "SyncInstanceUpdate"


class InstanceListApi(APIView):
    @extend_schema(operation_id="sync_instances_list", responses=InstanceOutputSerializer(many=True))
    def get(self, request):
        return Response(InstanceOutputSerializer(selectors.instance_list(user=request.user), many=True).data)

    @extend_schema(
        operation_id="sync_instances_register",
        request=InstanceInputSerializer,
        responses={201: InstanceOutputSerializer, 200: InstanceOutputSerializer},
        description="Register a client instance (201), or change a registered one (200). Pull and push register "
        "an unknown key by themselves.",
    )
    def post(self, request):
        serializer = InstanceInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        instance, created = instance_register(user=request.user, key=data.pop("key"), **data)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(InstanceOutputSerializer(instance).data, status=code)


class InstanceDetailApi(APIView):
    @extend_schema(operation_id="sync_instances_get", responses=InstanceOutputSerializer)
    def get(self, request, key: str):
        return Response(InstanceOutputSerializer(selectors.instance_get(user=request.user, key=key)).data)

    @extend_schema(
        operation_id="sync_instances_update", request=InstanceUpdateSerializer, responses=InstanceOutputSerializer
    )
    def patch(self, request, key: str):
        instance = selectors.instance_get(user=request.user, key=key)
        serializer = InstanceUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(
            InstanceOutputSerializer(instance_update(instance=instance, data=serializer.validated_data)).data
        )

    @extend_schema(
        operation_id="sync_instances_remove",
        responses={204: None},
        description="Forget an instance: tombstones stop waiting for it. Its local cache must start over with a "
        "full pull if it comes back.",
    )
    def delete(self, request, key: str):
        instance_remove(instance=selectors.instance_get(user=request.user, key=key))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- pull and push ------------------------------------------------------------------------------------------------


class ChangeSerializer(serializers.Serializer):
    type = serializers.ChoiceField(FeedType.choices)
    op = serializers.ChoiceField(OPS, help_text="edit: a person's correction, which overwrites (memory/update).")
    uid = serializers.UUIDField(required=False, allow_null=True, help_text="Not needed for settings.")
    clock = DictField(help_text="The vector clock of this version: {instance key: counter}.")
    modified_at = MomentField(required=False, help_text="When it was changed (default: now).")
    data = DictField(required=False, help_text="The object's fields (all for create, the changed ones else).")

    class Meta:
        ref_name = "SyncChange"

    def validate_clock(self, value):
        problem = clock_problem(value)
        if problem:
            raise serializers.ValidationError(problem[0].upper() + problem[1:] + ".")
        return value

    def validate(self, attrs):
        kind, op = attrs["type"], attrs["op"]
        if kind != FeedType.SETTINGS and attrs.get("uid") is None:
            raise serializers.ValidationError({"uid": ["Every change but the settings' names its uid."]})
        if kind == FeedType.SETTINGS and op == "delete":
            raise serializers.ValidationError({"op": ["The settings document cannot be deleted."]})
        if op == "delete":
            attrs["data"] = {}
            return attrs
        data = DATA_SERIALIZERS[kind](data=attrs.get("data", {}), partial=op != "create" and kind != "settings")
        if not data.is_valid():
            raise serializers.ValidationError({"data": data.errors})
        attrs["data"] = data.validated_data
        return attrs


class PullInputSerializer(serializers.Serializer):
    instance = serializers.CharField(max_length=64)
    cursor = serializers.IntegerField(
        min_value=0, max_value=BIGINT_MAX, required=False, allow_null=True, help_text="None: a full pull."
    )
    limit = serializers.IntegerField(min_value=1, max_value=MAX_PULL_LIMIT, default=PULL_LIMIT)

    class Meta:
        ref_name = "SyncPullInput"


class PullOutputSerializer(serializers.Serializer):
    instance = serializers.CharField()
    items = serializers.ListField(
        child=serializers.DictField(),
        help_text="Feed order: {type, uid, seq, deleted, clock, changed_at, changed_by, data} or a tombstone "
        "{type, uid, seq, deleted: true, clock, deleted_at, deleted_by}.",
    )
    cursor = serializers.IntegerField(help_text="Send it with the next pull.")
    has_more = serializers.BooleanField()
    head = serializers.IntegerField(help_text="The feed's newest number.")

    class Meta:
        ref_name = "SyncPullOutput"


class PushInputSerializer(serializers.Serializer):
    instance = serializers.CharField(max_length=64)
    changes = ChangeSerializer(
        many=True,
        max_length=MAX_CHANGES,
        allow_empty=True,
        help_text=f"Their memories name at most {MAX_PUSH_ENTITIES} entities in all (50 each).",
    )

    class Meta:
        ref_name = "SyncPushInput"

    def to_internal_value(self, data):
        # Counted before each change is checked: checking a book's entries is the costly part.
        changes = data.get("changes") if isinstance(data, dict) else None
        datas = [c.get("data") for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []
        if push_lorebook_entries(d for d in datas if isinstance(d, dict)) > MAX_PUSH_LOREBOOK_ENTRIES:
            raise serializers.ValidationError(
                {"changes": [f"At most {MAX_PUSH_LOREBOOK_ENTRIES:,} lorebook entries per push: send fewer books."]}
            )
        return super().to_internal_value(data)

    def validate(self, attrs):
        if push_entities(change.get("data") or {} for change in attrs["changes"]) > MAX_PUSH_ENTITIES:
            raise serializers.ValidationError(
                {"changes": [f"At most {MAX_PUSH_ENTITIES} entities per push: send fewer changes at a time."]}
            )
        errors = {}
        for index, change in enumerate(attrs["changes"]):
            if int(change["clock"].get(attrs["instance"], 0)) < 1:
                errors[str(index)] = {
                    "clock": [f"The clock counts this instance's change: give {attrs['instance']!r} 1 or more."]
                }
        if errors:
            raise serializers.ValidationError({"changes": errors})
        return attrs


class OutcomeSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    type = serializers.CharField()
    uid = serializers.CharField()
    result = serializers.ChoiceField(["applied", "merged", "conflict_resolved", "rejected"])
    clock = serializers.DictField(help_text="The stored version's clock: the instance's copy takes it.")
    reason = serializers.CharField(help_text="Of a rejection: stale, deleted, unknown, character_missing, …")
    winner = serializers.CharField(help_text="Of a resolved conflict: incoming or server.")
    item = serializers.DictField(allow_null=True, help_text="The stored version, when it is not the instance's.")

    class Meta:
        ref_name = "SyncOutcome"


class PushOutputSerializer(serializers.Serializer):
    instance = serializers.CharField()
    results = OutcomeSerializer(many=True)
    cursor = serializers.IntegerField()

    class Meta:
        ref_name = "SyncPushOutput"


def _instance(request, key: str):
    instance_key_check(key, field="instance")
    instance, _ = instance_register(user=request.user, key=key)
    return instance


class SyncPullApi(APIView):
    @extend_schema(
        operation_id="sync_pull",
        request=PullInputSerializer,
        responses=PullOutputSerializer,
        description="What changed on the user's feed since `cursor` (memories, characters, the settings "
        "document, and tombstones of what was deleted), in pages; no cursor: everything (a full pull).",
    )
    def post(self, request):
        serializer = PullInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        instance = _instance(request, data["instance"])
        pulled = sync_pull(user=request.user, instance=instance, cursor=data.get("cursor"), limit=data["limit"])
        body = {"instance": instance.key, **pulled.__dict__}
        return Response(PullOutputSerializer(body).data)


class SyncPushApi(APIView):
    @extend_schema(
        operation_id="sync_push",
        request=PushInputSerializer,
        responses=PushOutputSerializer,
        description="Apply a batch of queued changes, all or none: each answered applied, merged, "
        "conflict_resolved or rejected, with the clock to keep and, when the stored version is not the "
        "instance's, that version. Bad input is a 400 naming the change and field; nothing is stored then.",
    )
    def post(self, request):
        serializer = PushInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        instance = _instance(request, data["instance"])
        now = timezone.now()
        changes = [
            Change(
                index=index,
                type=item["type"],
                op=item["op"],
                uid=item.get("uid"),
                clock={key: int(count) for key, count in item["clock"].items()},
                modified_at=item.get("modified_at") or now,
                data=item.get("data", {}),
            )
            for index, item in enumerate(data["changes"])
        ]
        pushed = sync_push(user=request.user, instance=instance, changes=changes)
        results = [outcome.__dict__ for outcome in pushed.outcomes]
        return Response(
            PushOutputSerializer({"instance": instance.key, "results": results, "cursor": pushed.cursor}).data
        )


class StatusInstanceSerializer(serializers.Serializer):
    instance = InstanceOutputSerializer()
    behind = serializers.IntegerField(help_text="Changes it has not pulled yet.")

    class Meta:
        ref_name = "SyncStatusInstance"


class StatusOutputSerializer(serializers.Serializer):
    head = serializers.IntegerField()
    objects = serializers.IntegerField(help_text="Objects on the feed (memories, characters, settings).")
    tombstones = serializers.IntegerField()
    tombstones_held = serializers.IntegerField(help_text="Tombstones some instance has not pulled past yet.")
    instances = StatusInstanceSerializer(many=True)
    instance = StatusInstanceSerializer(required=False)

    class Meta:
        ref_name = "SyncStatus"


class SyncStatusApi(APIView):
    @extend_schema(
        operation_id="sync_status",
        parameters=[OpenApiParameter("instance", str, required=False, description="The asking instance's key.")],
        responses=StatusOutputSerializer,
    )
    def get(self, request):
        key = request.query_params.get("instance")
        instance = selectors.instance_get(user=request.user, key=key) if key else None
        return Response(StatusOutputSerializer(selectors.sync_status(user=request.user, instance=instance)).data)
