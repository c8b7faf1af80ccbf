import os

from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
LOREKEEPER_SIGNUP_OPEN = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Static files straight from the source folders, no collectstatic needed.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# Live-server and race tests open connections from many threads: close each at the end of its request, so none
# outlives the test database. A worker started by a test may be told to keep its connections, as a deployment's does
# (a variable of the tests' own: a developer's exported CONN_MAX_AGE does not reach the suite).
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("LOREKEEPER_TEST_CONN_MAX_AGE") or 0)  # noqa: F405

# Tasks run where they are sent (on commit), so tests see their effect; tests of the real background path start a
# worker of their own (tests/worker.py), which sends its own tasks to the broker (LOREKEEPER_CELERY_EAGER=0).
CELERY_TASK_ALWAYS_EAGER = os.environ.get("LOREKEEPER_CELERY_EAGER", "1") == "1"
CELERY_TASK_EAGER_PROPAGATES = True
# A worker started by a test may be told to hand back unacknowledged tasks quickly (a worker killed mid-task).
if os.environ.get("CELERY_VISIBILITY_TIMEOUT"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {  # noqa: F405
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }

# The scripted model answers at once: retries wait milliseconds, not seconds.
LOREKEEPER_LLM = {**LOREKEEPER_LLM, "backoff": 0.01, "backoff_max": 0.05, "retry_after_max": 0.2}  # noqa: F405
LOREKEEPER_EXTRACTION = {**LOREKEEPER_EXTRACTION, "retry_backoff": 0.05, "retry_backoff_max": 0.2}  # noqa: F405

# Two test runs at once (two checkouts, or a helper's run beside yours) each name their own test database.
if os.environ.get("LOREKEEPER_TEST_DB_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["LOREKEEPER_TEST_DB_NAME"]}  # noqa: F405

# Rate limits and sign-in attempts counted in this process (tests of the limits set their own rates).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "100000/min"}}  # noqa: F405
