from django.apps import AppConfig


class ArchivesConfig(AppConfig):
    name = "apps.archives"
    label = "archives"
    verbose_name = "Archives and backups"

    def ready(self) -> None:
        from apps.archives import tasks  # noqa: F401 — registers the app's tasks, which its services send by name
