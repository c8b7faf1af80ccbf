"""Production: the same code, configured only through the environment (every variable: docs/CONFIGURATION.md)."""

from .base import *  # noqa: F403
from .base import env

SECRET_KEY = env("SECRET_KEY")
DEBUG = env.bool("DEBUG", default=False)

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=60 * 60 * 24 * 30)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}

# A public deployment never lets a user's provider URL reach its own network (apps/common/netguard.py).
LOREKEEPER_PROVIDER_PRIVATE_HOSTS = env.bool("LOREKEEPER_PROVIDER_PRIVATE_HOSTS", default=False)
