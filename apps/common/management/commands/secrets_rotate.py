"""`manage.py secrets_rotate`: after a SECRET_KEY rotation, encrypt every stored secret again with the new key, so
the old key can leave SECRET_KEY_FALLBACKS (apps/common/secrets.py)."""

from __future__ import annotations

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.common.secrets import secret_rotate

# Every model that keeps a user's secret names its field this way (LLM connections, embedding settings).
SECRET_FIELD = "api_key_encrypted"


class Command(BaseCommand):
    help = "Encrypt every stored API key again with the current SECRET_KEY."

    def handle(self, *args, **options) -> None:
        for model in apps.get_models():
            if SECRET_FIELD not in {field.name for field in model._meta.fields}:
                continue
            changed = 0
            with transaction.atomic():
                for pk, token in model._default_manager.exclude(**{SECRET_FIELD: ""}).values_list("pk", SECRET_FIELD):
                    rotated = secret_rotate(token)
                    if rotated != token:
                        model._default_manager.filter(pk=pk).update(**{SECRET_FIELD: rotated})
                        changed += 1
            self.stdout.write(f"{model._meta.label}: {changed} secret(s) encrypted with the current key")
