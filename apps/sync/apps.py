from django.apps import AppConfig


class SyncConfig(AppConfig):
    name = "apps.sync"
    label = "sync"

    def ready(self) -> None:
        from apps.sync import receivers  # noqa: F401 — connects what the apps below ask of sync
