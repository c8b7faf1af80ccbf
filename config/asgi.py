import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
# Under ASGI each request runs its database work in a thread of its own: a connection Django kept for reuse would stay
# with a thread no later request uses. So each request takes one from a pool and gives it back: a new connection per
# request cost about 6 ms to open, and its server process starts with cold catalog caches, which made a search's
# queries several times slower (bench/locomo_speed.py). DATABASE_POOL=0 opens and closes one per request instead.
os.environ.setdefault("DATABASE_POOL", "10")
os.environ.setdefault("CONN_MAX_AGE", "0")
from apps.common.handler import asgi_application  # noqa: E402 — the settings module chosen first

django_application = asgi_application()

from apps.common.admission import admission  # noqa: E402 — after the settings are loaded
from apps.common.slow_bodies import body_time_limit  # noqa: E402
from apps.common.uploads import limit_asgi_body  # noqa: E402
from apps.llm.outbound import connections_kept  # noqa: E402

# The serving loop keeps its connections to people's models open between replies (apps/llm/outbound.py).
application = connections_kept(body_time_limit(limit_asgi_body(admission(django_application))))

from django.conf import settings  # noqa: E402

from apps.common.heap import heap_settle  # noqa: E402
from apps.llm.outbound import ssl_context  # noqa: E402 (needs the apps loaded)
from apps.memories.embeddings import local_model_load  # noqa: E402

# Ready before serving: this runs while the worker boots, before it takes its first connection (the web worker,
# apps/common/worker.py, reports to gunicorn meanwhile), so no request waits for the embedding model to load while
# it holds a database connection, and connections arriving meanwhile wait in the listen queue or go to a worker that
# is ready. The first model stream's TLS context (its CA certificates, tens of milliseconds) is made here too.
local_model_load(background=False)
ssl_context()
# The interpreter's lock handed between a request's thread and the event loop sooner (config/settings/serving.py).
sys.setswitchinterval(settings.LOREKEEPER_WEB_SWITCH_INTERVAL_MS / 1000)
# Then what the start loaded is frozen out of the garbage collector's view (apps/common/heap.py): a full collection
# walked it all, stopping the worker for about 300 ms every few dozen requests.
heap_settle()
