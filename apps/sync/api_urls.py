from django.urls import path

from apps.sync.apis import backups, chats, data, instances, legacy, save

urlpatterns = [
    path("chats/<int:chat_id>/append", chats.ChatAppendApi.as_view(), name="chat-append"),
    path("chats/<int:chat_id>/patch", chats.ChatPatchApi.as_view(), name="chat-patch"),
    path("chats/<int:chat_id>/metadata", chats.ChatMetadataApi.as_view(), name="chat-metadata"),
    path("chats/<int:chat_id>/delta", chats.ChatDeltaApi.as_view(), name="chat-delta"),
    path("chats/<int:chat_id>/save", save.ChatSaveApi.as_view(), name="chat-save"),
    path("chats/<int:chat_id>/revisions/", save.ChatRevisionListApi.as_view(), name="chat-revisions"),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/export",
        save.ChatRevisionExportApi.as_view(),
        name="chat-revision-export",
    ),
    path(
        "chats/<int:chat_id>/revisions/<int:revision_id>/restore",
        save.ChatRevisionRestoreApi.as_view(),
        name="chat-revision-restore",
    ),
    path(
        "chats/<int:chat_id>/messages/<int:index>/data/<str:namespace>",
        data.MessageExtensionDataApi.as_view(),
        name="message-data",
    ),
    path("settings", data.SettingsApi.as_view(), name="settings"),
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
