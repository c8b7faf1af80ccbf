"""How the web serves requests and streams (apps/common/admission.py, apps/common/slow_bodies.py, apps/generation):
their places, time limits and bounds, from the environment (docs/CONFIGURATION.md). Kept apart from base.py, which
imports it."""

import environ
from django.core.exceptions import ImproperlyConfigured

env = environ.Env()

# A request body that arrives too slowly is cut off with 408 (apps/common/slow_bodies.py): each read within
# read_seconds, the whole within seconds plus one second for every min_rate bytes received.
LOREKEEPER_REQUEST_BODY = {
    "read_seconds": env.float("LOREKEEPER_BODY_READ_SECONDS", default=15.0),
    "seconds": env.float("LOREKEEPER_BODY_SECONDS", default=60.0),
    "min_rate": env.int("LOREKEEPER_BODY_MIN_RATE", default=64 * 1024),  # bytes a second
}

# At most `places` requests of a process at work at once, each waiting up to `wait` seconds for its place, then 503
# with Retry-After (apps/common/admission.py): by default two fewer than the pool's connections, none without a pool.
LOREKEEPER_ADMISSION = {
    "places": env.int("LOREKEEPER_ADMISSION_PLACES", default=max(1, env.int("DATABASE_POOL", default=0) - 2))
    if env.int("DATABASE_POOL", default=0)
    else 0,
    "wait": env.float("LOREKEEPER_ADMISSION_WAIT", default=30.0),
}

# Generating replies (apps/generation, docs/CONFIGURATION.md): every stream has bounds, and a stream whose process
# died is noticed. A bound stops the reply, keeps what arrived and says why.
LOREKEEPER_GENERATION = {
    # The model is asked for the connection's reply length; a reply that goes past it times this (counted with the
    # connection's tokenizer, which for most models is an estimate that errs high) is stopped. The message limit
    # (100,000 characters) stops it in any case.
    "reply_tokens_margin": env.float("LOREKEEPER_GENERATION_REPLY_TOKENS_MARGIN", default=1.25),
    "max_seconds": env.float("LOREKEEPER_GENERATION_MAX_SECONDS", default=600.0),  # a generation in all
    "idle_seconds": env.float("LOREKEEPER_GENERATION_IDLE_SECONDS", default=60.0),  # between tokens
    # A streaming generation's lease, renewed (with the text so far) every third of it.
    "lease_seconds": env.float("LOREKEEPER_GENERATION_LEASE_SECONDS", default=30.0),
    "streams_per_user": env.int("LOREKEEPER_GENERATION_STREAMS_PER_USER", default=4),  # then 429
    "streams_per_process": env.int("LOREKEEPER_GENERATION_STREAMS_PER_PROCESS", default=100),  # then 503
    "retry_after": env.int("LOREKEEPER_GENERATION_RETRY_AFTER", default=5),  # seconds, with those 429s and 503s
}

# How long a web process's thread may keep the interpreter's lock while another waits for it, in ms (Python's own
# default is 5). A request's thread gives the lock up at every database query, and when the answer is back it waits
# for the event loop, busy relaying streams, to hand it back: a request of thirty queries could wait thirty times
# that. Set in config/asgi.py, for the web processes only. bench/chat.py, 0.5 against 5 in two pairs of runs, people
# chatting: others' p95 1.90/1.64/1.63x against 2.18/2.60/2.21x, and 2.39/1.76/1.86x against 2.95/2.65/2.61x.
# Python refuses an interval of 0 or less at boot with an error that names no setting, so it is refused here.
LOREKEEPER_WEB_SWITCH_INTERVAL_MS = env.float("LOREKEEPER_WEB_SWITCH_INTERVAL_MS", default=0.5)
if not LOREKEEPER_WEB_SWITCH_INTERVAL_MS > 0:
    raise ImproperlyConfigured(
        f"LOREKEEPER_WEB_SWITCH_INTERVAL_MS must be a number of milliseconds above 0, such as 0.5 (the default); "
        f"it is {LOREKEEPER_WEB_SWITCH_INTERVAL_MS:g}."
    )
