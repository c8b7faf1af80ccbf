from django.urls import path

from apps.archives.apis import backups

urlpatterns = [
    path("backups", backups.BackupListApi.as_view(), name="backups"),
    path("backups/settings", backups.BackupSettingsApi.as_view(), name="backup-settings"),
    path("backups/import", backups.ArchiveImportApi.as_view(), name="backup-import"),
    path("backups/<int:backup_id>", backups.BackupDetailApi.as_view(), name="backup"),
    path("backups/<int:backup_id>/download", backups.BackupDownloadApi.as_view(), name="backup-download"),
    path("backups/<int:backup_id>/restore", backups.BackupRestoreApi.as_view(), name="backup-restore"),
]
