from django.urls import path

from apps.sync.apis import backups, instances, legacy, settings

urlpatterns = [
    path("settings", settings.SettingsApi.as_view(), name="settings"),
    path("sync/instances", instances.InstanceListApi.as_view(), name="sync-instances"),
    path("sync/instances/<str:key>", instances.InstanceDetailApi.as_view(), name="sync-instance"),
    path("sync/pull", instances.SyncPullApi.as_view(), name="sync-pull"),
    path("sync/push", instances.SyncPushApi.as_view(), name="sync-push"),
    path("sync/status", instances.SyncStatusApi.as_view(), name="sync-status"),
    path("chats/<int:chat_id>/legacy-import", legacy.ChatLegacyImportApi.as_view(), name="chat-legacy-import"),
    path("backups", backups.BackupListApi.as_view(), name="backups"),
    path("backups/settings", backups.BackupSettingsApi.as_view(), name="backup-settings"),
    path("backups/import", backups.ArchiveImportApi.as_view(), name="backup-import"),
    path("backups/<int:backup_id>", backups.BackupDetailApi.as_view(), name="backup"),
    path("backups/<int:backup_id>/download", backups.BackupDownloadApi.as_view(), name="backup-download"),
    path("backups/<int:backup_id>/restore", backups.BackupRestoreApi.as_view(), name="backup-restore"),
]
