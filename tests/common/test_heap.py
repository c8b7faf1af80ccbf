"""apps/common/heap.py: a web worker's start is frozen out of the garbage collector's view once it has booted, so a
full collection walks only what its requests made since (it walked the whole start: about 300 ms each). And the web
worker's interpreter lock is handed over every LOREKEEPER_WEB_SWITCH_INTERVAL_MS (config/asgi.py)."""

import functools
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.servers import ROOT

PROBE = (
    "import gc, json, config.asgi; "
    "print(json.dumps([gc.get_freeze_count(), len(gc.get_objects()), gc.get_threshold()[2], "
    "__import__('sys').getswitchinterval()]))"
)


@functools.cache
def _web_process() -> list:
    """What a web worker's process holds once config.asgi is imported."""
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
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_web_applications_start_is_out_of_the_collectors_view():
    frozen, walked, full_after, _ = _web_process()
    assert frozen > 100_000  # Django, the apps, the libraries they load
    assert walked < frozen / 20  # what a full collection still walks: what was made after the start
    assert full_after == 100


def test_the_web_process_hands_its_interpreter_lock_over_sooner():
    assert _web_process()[3] == settings.LOREKEEPER_WEB_SWITCH_INTERVAL_MS / 1000 == 0.0005  # Python's own: 0.005


def _serving_settings(interval: str) -> subprocess.CompletedProcess:
    """config/settings/serving.py read with LOREKEEPER_WEB_SWITCH_INTERVAL_MS set to `interval`."""
    return subprocess.run(
        [sys.executable, "-c", "import config.settings.serving as s; print(s.LOREKEEPER_WEB_SWITCH_INTERVAL_MS)"],
        cwd=ROOT,
        env={**os.environ, "LOREKEEPER_WEB_SWITCH_INTERVAL_MS": interval},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("value", ["0", "-1", "-0.5"])
def test_an_interval_of_zero_or_less_is_refused_naming_the_variable(value):
    """Python's own refusal, at each web worker's boot, names no setting: the settings refuse it first."""
    run = _serving_settings(value)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: LOREKEEPER_WEB_SWITCH_INTERVAL_MS must be")
    assert f"it is {float(value):g}." in last


def test_an_interval_above_zero_is_taken():
    run = _serving_settings("2")
    assert run.stdout.strip() == "2.0", run.stderr[-2000:]
