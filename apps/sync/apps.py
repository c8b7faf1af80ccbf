from django.apps import AppConfig


class SyncConfig(AppConfig):
    name = "apps.sync"
    label = "sync"

    def ready(self) -> None:
        from apps.sync import (
            receivers,  # noqa: F401 — connects what the apps below ask of sync
            tasks,  # noqa: F401 — registers the app's tasks, which its services send by name
        )
