from django.apps import AppConfig


class ExtractionConfig(AppConfig):
    name = "apps.extraction"
    label = "extraction"
    verbose_name = "Extraction pipeline"

    def ready(self) -> None:
        from apps.extraction import (
            receivers,  # noqa: F401 — connects what the apps below ask of extraction
            tasks,  # noqa: F401 — registers the app's tasks, which its services send by name
        )
