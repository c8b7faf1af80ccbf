import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
# Under ASGI each request runs its database work in a thread of its own: a connection kept for reuse would stay with
# a thread no later request uses, so they would pile up. Closed after each request (a pooler in front may keep them).
os.environ.setdefault("CONN_MAX_AGE", "0")
django_application = get_asgi_application()

from apps.common.uploads import limit_asgi_body  # noqa: E402 — after the settings are loaded

application = limit_asgi_body(django_application)

from apps.memories.embeddings import warm_up_in_background  # noqa: E402 (needs the apps loaded)

warm_up_in_background()  # as config/wsgi.py: a worker's first search does not wait for the model to load
