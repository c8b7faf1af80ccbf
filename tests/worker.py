"""A real Celery worker for tests that claim background processing: a separate process reading the test's own
database (committed data only) and taking tasks from the test's broker (the `broker` fixture)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def worker_env(broker: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")}
    name = settings.DATABASES["default"]["NAME"]
    env.update(CELERY_BROKER_URL=broker, DJANGO_SETTINGS_MODULE="config.settings.test", LOREKEEPER_DATABASE_NAME=name)
    # A worker loads the deployment's local model as it starts (apps/memories/tasks.py): the tests' workers embed
    # through each user's own scripted provider, and one that needs the local model says so in `extra`.
    env.setdefault("LOREKEEPER_EMBEDDINGS_PROVIDER", "none")
    if env.get("DATABASE_URL"):
        env["DATABASE_URL"] = urlunsplit(urlsplit(env["DATABASE_URL"])._replace(path=f"/{name}"))
    env.update(extra)
    return env


def start_worker(broker: str, *, eager: bool = False, processes: int = 0, **extra: str) -> subprocess.Popen:
    """`eager=False`: the tasks the worker sends go through the broker too, as in production. `processes`: a
    prefork pool of that many processes, as production runs (0: one task at a time in the worker itself)."""
    env = worker_env(broker, LOREKEEPER_CELERY_EAGER="1" if eager else "0", **extra)
    pool = f"--concurrency={processes}" if processes else "--pool=solo"
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", pool, "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


def stop_worker(worker: subprocess.Popen, *, kill: bool = False) -> None:
    if worker.poll() is not None:
        return
    os.killpg(worker.pid, signal.SIGKILL if kill else signal.SIGTERM)
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)


@contextmanager
def celery_worker(broker: str, **options):
    worker = start_worker(broker, **options)
    try:
        yield worker
    finally:
        stop_worker(worker)


def wait_for(condition: Callable[[], object], *, timeout: float, what: str, worker=None, every: float = 0.25):
    """Poll until `condition()` is true; fail saying `what` did not happen (or that the worker died)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if worker is not None:
            assert worker.poll() is None, f"the worker died before {what}"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(every)


@contextmanager
def tasks_sent_to(url: str):
    """Tasks go to the broker at `url` instead of running in place (the test settings' eager mode)."""
    from apps.common.tasks import hooks_drain
    from config.celery import app as celery_app

    hooks_drain()  # nothing asked for before goes to this broker, nor after to that one
    saved = celery_app.conf.broker_url, celery_app.conf.result_backend, celery_app.conf.task_always_eager
    celery_app.conf.broker_url = celery_app.conf.result_backend = url
    celery_app.conf.task_always_eager = False
    forget_connections(celery_app)
    try:
        yield
    finally:
        hooks_drain()
        celery_app.conf.broker_url, celery_app.conf.result_backend, celery_app.conf.task_always_eager = saved
        forget_connections(celery_app)


def forget_connections(app) -> None:
    """Celery caches its broker pool and result backend at first use, kombu its producer pools per broker URL; drop
    them so new URLs (or a broker started again at the same URL) take effect."""
    from kombu import pools

    pools.reset()
    if app._pool is not None:
        app._pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None
    app._local.__dict__.pop("backend", None)
