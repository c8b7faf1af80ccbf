from django.apps import AppConfig

from apps.common.capacity import full_check_add


class GenerationConfig(AppConfig):
    name = "apps.generation"
    label = "generation"
    verbose_name = "Generation"

    def ready(self) -> None:
        from apps.generation.services.stream import streams_full

        full_check_add(streams_full)  # a worker streaming its most replies leaves new connections to the others
