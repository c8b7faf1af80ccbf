"""Lorekeeper as production runs it, for tests that need the real thing: gunicorn (production settings, threaded
workers, persistent database connections) in a process of its own, on a free loopback port, reading the test's
database; and the embedded PostgreSQL server stopped and started again under it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(*, broker: str, workers: int = 2, threads: int = 4, **extra: str):
    """Yield the base URL of a gunicorn serving the test database; stop it afterwards."""
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
        **extra,
    )
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}"]
    command += ["--workers", str(workers), "--worker-class", "gthread", "--threads", str(threads)]
    server = subprocess.Popen([*command, "--log-level", "warning"], cwd=ROOT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, "gunicorn exited while starting"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "gunicorn did not start within 60 s"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def embedded_postgres():
    """The embedded server this process joined (apps/common/embedded.py), or None with DATABASE_URL set."""
    if os.environ.get("DATABASE_URL"):
        return None
    from pgserver.postgres_server import PostgresServer

    return next(iter(PostgresServer._instances.values()), None)


def restart_postgres(server, *, down_for: float) -> None:
    """Stop the server at once (`fast`: every session ended, as a crash or a failover does to its clients), leave
    it down for `down_for` seconds, and start it again with the same options (socket folder, log)."""
    from django.db import connections
    from pgserver._commands import pg_ctl
    from pgserver.postgres_server import PostmasterInfo

    options = (server.pgdata / "postmaster.opts").read_text().split(None, 1)[1].strip()
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    connections.close_all()  # this process's connections died with it
    time.sleep(down_for)
    pg_ctl(["-w", "-o", options, "-l", str(server.log), "start"], pgdata=server.pgdata, user=server.system_user)
    deadline = time.monotonic() + 60
    while True:
        info = PostmasterInfo.read_from_pgdata(server.pgdata)
        if info is not None and info.is_running() and info.status == "ready":
            break
        assert time.monotonic() < deadline, "PostgreSQL did not come back within 60 s"
        time.sleep(0.2)
    # pgserver stops the server when the last process using it exits, by the postmaster it knew.
    server._postmaster_info = info
