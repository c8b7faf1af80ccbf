import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_wsgi_application()

from apps.memories.embeddings import local_model_load  # noqa: E402 (needs the apps loaded)

local_model_load(background=True)
