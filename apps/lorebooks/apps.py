from django.apps import AppConfig


class LorebooksConfig(AppConfig):
    name = "apps.lorebooks"
    label = "lorebooks"
    verbose_name = "Lorebooks (World Info)"

    def ready(self) -> None:
        from apps.lorebooks import tasks  # noqa: F401 — registers the app's tasks, which its services send by name
