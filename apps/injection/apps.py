from django.apps import AppConfig


class InjectionConfig(AppConfig):
    name = "apps.injection"
    label = "injection"
    verbose_name = "Injection and recall"
