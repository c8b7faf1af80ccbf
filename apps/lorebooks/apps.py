from django.apps import AppConfig


class LorebooksConfig(AppConfig):
    name = "apps.lorebooks"
    label = "lorebooks"
    verbose_name = "Lorebooks (World Info)"
