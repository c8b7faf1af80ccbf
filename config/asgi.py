import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
django_application = get_asgi_application()

from apps.common.uploads import limit_asgi_body  # noqa: E402 — after the settings are loaded

application = limit_asgi_body(django_application)
