"""Backups over the API: archives of the account made now or on a schedule, downloaded, restored; archives
uploaded to import. The work runs in the background: the answers are the job, to poll."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.archives import selectors
from apps.archives.models import BackupSettings
from apps.archives.services.backups import (
    archive_upload,
    backup_delete,
    backup_restore_start,
    backup_settings_get,
    backup_settings_set,
    backup_start,
)
from apps.common.exceptions import ApplicationError


class BackupOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField(help_text="backup, import or restore.")
    trigger = serializers.CharField(help_text="manual, automatic or upload.")
    state = serializers.CharField(help_text="queued, running, done or failed.")
    stage = serializers.CharField()
    progress = serializers.IntegerField(help_text="Percent.")
    size = serializers.IntegerField(help_text="Bytes of the archive.")
    counts = serializers.DictField()
    error = serializers.CharField()
    source = serializers.IntegerField(source="source_id", allow_null=True, help_text="The restored backup.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "Backup"


class BackupSettingsSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(BackupSettings.Mode.choices, required=False)
    every_hours = serializers.IntegerField(min_value=1, max_value=24 * 30, required=False)
    keep = serializers.IntegerField(min_value=1, max_value=100, required=False)

    class Meta:
        ref_name = "BackupSettings"


class BackupListApi(APIView):
    @extend_schema(operation_id="backups_list", responses=BackupOutputSerializer(many=True))
    def get(self, request):
        return Response(BackupOutputSerializer(selectors.backup_list(user=request.user), many=True).data)

    @extend_schema(
        operation_id="backups_start",
        request=None,
        responses={202: BackupOutputSerializer},
        description="Back up now: the job is queued (409 while another backup, import or restore runs, or when the "
        "account's stored backups and uploads already fill its quota, LOREKEEPER_BACKUP_QUOTA_BYTES; a backup "
        "that turns out larger than the room left fails its job).",
    )
    def post(self, request):
        return Response(BackupOutputSerializer(backup_start(user=request.user)).data, status=status.HTTP_202_ACCEPTED)


class BackupDetailApi(APIView):
    @extend_schema(operation_id="backups_get", responses=BackupOutputSerializer)
    def get(self, request, backup_id: int):
        return Response(BackupOutputSerializer(selectors.backup_get(user=request.user, backup_id=backup_id)).data)

    @extend_schema(operation_id="backups_delete", responses={204: None})
    def delete(self, request, backup_id: int):
        backup_delete(backup=selectors.backup_get(user=request.user, backup_id=backup_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class BackupDownloadApi(APIView):
    @extend_schema(
        operation_id="backups_download",
        responses={(200, "application/zip"): OpenApiTypes.BINARY},
        description="The archive (zip): manifest.json, characters.jsonl, chats.jsonl and chats/<uid>.jsonl "
        "(SillyTavern JSONL), entities.jsonl, memories.jsonl, lorebooks.jsonl and lorebooks/<uid>.jsonl (each "
        "book's World Info entries), settings.json, tombstones.jsonl.",
    )
    def get(self, request, backup_id: int):
        backup = selectors.backup_get(user=request.user, backup_id=backup_id)
        if not backup.file:
            raise ApplicationError("This job has no archive (yet).", {"field": "backup"}, status=404)
        name = f"lorekeeper-{backup.created_at:%Y-%m-%d-%H%M}.zip"
        return FileResponse(backup.file.open("rb"), as_attachment=True, filename=name, content_type="application/zip")


class BackupRestoreApi(APIView):
    @extend_schema(
        operation_id="backups_restore",
        request=None,
        responses={202: BackupOutputSerializer},
        description="Bring the backup's content back: merged by the sync rules, what was deleted since comes "
        "back, what was edited since keeps its newer version, chats changed since are replaced by the backup's "
        "version (the current one kept as a revision).",
    )
    def post(self, request, backup_id: int):
        job = backup_restore_start(backup=selectors.backup_get(user=request.user, backup_id=backup_id))
        return Response(BackupOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ArchiveImportInputSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A Lorekeeper archive (zip).")

    class Meta:
        ref_name = "ArchiveImportInput"


class ArchiveImportApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="backups_import",
        request={"multipart/form-data": ArchiveImportInputSerializer},
        responses={202: BackupOutputSerializer},
        description="Import an archive into this account (empty or not), merged by the sync rules; deleted "
        "things stay deleted. The job reports what it created, updated and kept; every line is checked as the API "
        "checks what it stores, and a bad one fails the job naming the file and line, changing nothing. The "
        "uploaded file is removed once the import ends. 413 above LOREKEEPER_MAX_IMPORT_BYTES or when it would "
        "take the account's stored backups and uploads past its quota (`extra.field` is `file`).",
    )
    def post(self, request):
        serializer = ArchiveImportInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        upload = serializer.validated_data["file"]
        job = archive_upload(user=request.user, upload=upload, name=upload.name)
        return Response(BackupOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class BackupSettingsApi(APIView):
    @extend_schema(operation_id="backups_settings_get", responses=BackupSettingsSerializer)
    def get(self, request):
        return Response(BackupSettingsSerializer(backup_settings_get(user=request.user)).data)

    @extend_schema(
        operation_id="backups_settings_set",
        request=BackupSettingsSerializer,
        responses=BackupSettingsSerializer,
        description="automatic: an archive every `every_hours`; manual: only when asked. `keep`: how many.",
    )
    def patch(self, request):
        serializer = BackupSettingsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        saved = backup_settings_set(user=request.user, data=serializer.validated_data)
        return Response(BackupSettingsSerializer(saved).data)
