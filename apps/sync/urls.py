from django.urls import path

from apps.sync.views import devices, legacy, settings

app_name = "sync"

urlpatterns = [
    path("settings/", settings.settings_document, name="settings"),
    path("devices/", devices.devices, name="devices"),
    path("devices/<str:key>/", devices.instance_change, name="instance"),
    path("devices/<str:key>/forget/", devices.instance_forget, name="instance-forget"),
    path("backups/", devices.backups_partial, name="backups"),
    path("backups/now/", devices.backup_now, name="backup-now"),
    path("backups/mode/", devices.backup_mode, name="backup-mode"),
    path("backups/import/", devices.archive_import_view, name="archive-import"),
    path("backups/<int:backup_id>/download/", devices.backup_download, name="backup-download"),
    path("backups/<int:backup_id>/restore/", devices.backup_restore, name="backup-restore"),
    path("backups/<int:backup_id>/delete/", devices.backup_remove, name="backup-delete"),
    path("chats/<int:chat_id>/legacy-import/", legacy.legacy_import, name="legacy-import"),
]
