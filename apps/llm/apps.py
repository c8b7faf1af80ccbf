from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "apps.llm"
    label = "llm"

    def ready(self) -> None:
        from apps.llm import tasks  # noqa: F401 — registers the app's tasks, which its services send by name
