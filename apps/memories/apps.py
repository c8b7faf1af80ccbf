from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "apps.memories"
    label = "memories"

    def ready(self) -> None:
        from apps.memories import (
            receivers,  # noqa: F401 — connects what the chats app's signals ask of memories
            tasks,  # noqa: F401 — registers the app's tasks, which its services send by name
        )
