import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
application = get_wsgi_application()

from apps.memories.embeddings import warm_up_in_background  # noqa: E402 (needs the apps loaded)

warm_up_in_background()
