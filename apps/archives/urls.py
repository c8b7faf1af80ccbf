from django.urls import path

from apps.archives.views import backups

app_name = "archives"

urlpatterns = [
    path("backups/", backups.backups, name="backups"),
    path("backups/card/", backups.backups_card, name="card"),
    path("backups/now/", backups.backup_now, name="backup-now"),
    path("backups/mode/", backups.backup_mode, name="backup-mode"),
    path("backups/import/", backups.archive_import_view, name="archive-import"),
    path("backups/<int:backup_id>/download/", backups.backup_download, name="backup-download"),
    path("backups/<int:backup_id>/restore/", backups.backup_restore, name="backup-restore"),
    path("backups/<int:backup_id>/delete/", backups.backup_remove, name="backup-delete"),
]
