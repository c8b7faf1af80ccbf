"""apps/common/heap.py: a web worker's start is frozen out of the garbage collector's view once it has booted, so a
full collection walks only what its requests made since (it walked the whole start: about 300 ms each)."""

import os
import subprocess
import sys

from django.conf import settings

from tests.servers import ROOT

PROBE = (
    "import gc, json, config.asgi; "
    "print(json.dumps([gc.get_freeze_count(), len(gc.get_objects()), gc.get_threshold()[2]]))"
)


def test_the_web_applications_start_is_out_of_the_collectors_view():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        LOREKEEPER_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
        SECRET_KEY="tests-only-" + "x" * 50,
        ALLOWED_HOSTS="127.0.0.1",
        LOREKEEPER_EMBEDDINGS_PROVIDER="none",
    )
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    frozen, walked, full_after = __import__("json").loads(run.stdout.strip().splitlines()[-1])

    assert frozen > 100_000  # Django, the apps, the libraries they load
    assert walked < frozen / 20  # what a full collection still walks: what was made after the start
    assert full_after == 100
