from django.apps import AppConfig


class ExtractionConfig(AppConfig):
    name = "apps.extraction"
    label = "extraction"
    verbose_name = "Extraction pipeline"
