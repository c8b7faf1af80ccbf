"""`manage.py serve` (`make run`) keeps the platform up: a real `kill -9` of each of its children, one after the
other, and the platform serves again within 10 seconds each time; only SIGINT stops it all.

One serve on its own var dir (a fresh database), Valkey port and web port, with the embedding provider `none` so
that no model loads. serve's children are found in var/serve.pids (apps/common/management/commands/serve.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import redis
from celery import Celery

from apps.accounts.services import TOKEN_PREFIX

ROOT = Path(__file__).resolve().parent.parent.parent
BACK_WITHIN = 10.0
CHILDREN = ["web", "worker", "beat", "valkey", "postgres"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _api_status(port: int) -> int | None:
    """The status of an API request that reads the database (an unknown token is looked up: 401), or None."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/characters/", headers={"Authorization": f"Bearer {TOKEN_PREFIX}unknown"}
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _pids(var: Path) -> dict[str, int | None]:
    try:
        return json.loads((var / "serve.pids").read_text())
    except (OSError, ValueError):
        return {}


def _wait(condition, *, timeout: float, what: str, serve: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert serve.poll() is None, f"serve exited ({serve.returncode}) before {what}"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.1)


def _ping(app: Celery, results: redis.Redis) -> bool:
    """A task through the broker to the worker and its result back (read from the result store directly: Celery's
    own waiting for a result keeps a subscription that does not survive Valkey's restart)."""
    try:
        task_id = app.send_task("common.ping", ["again"], retry=False).id
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            if meta := results.get(f"celery-task-meta-{task_id}"):
                return json.loads(meta)["result"] == "pong:again"
            time.sleep(0.05)
    except Exception:  # noqa: BLE001 — the broker or the worker not back yet
        return False
    return False


def _running(pid: int | None) -> bool:
    """Alive and not a zombie (a daemonized postmaster's exit is reaped by whoever adopted it, in its own time)."""
    try:
        return bool(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_everything(serve: subprocess.Popen, var: Path) -> None:
    """Whatever a failed test left: serve, its children's process groups and the postmaster."""
    pids = [pid for pid in _pids(var).values() if pid]
    try:
        pids += [p.pid for p in psutil.Process(serve.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        pass
    for pid in [serve.pid, *pids]:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    postmaster = var / "pgdata" / "postmaster.pid"
    if postmaster.exists():
        try:
            os.kill(int(postmaster.read_text().split("\n", 1)[0]), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def _kill_and_time(name: str, *, var: Path, web_port: int, serve: subprocess.Popen, ping) -> float:
    """kill -9 the child `name`; the seconds until it runs again, the API answers and a task makes a round trip."""
    killed_pid = _pids(var).get(name)
    assert killed_pid, f"serve.pids names no {name}: {_pids(var)}"
    os.kill(killed_pid, signal.SIGKILL)
    killed = time.monotonic()

    def back() -> bool:
        pid = _pids(var).get(name)
        return pid not in (None, killed_pid) and _running(pid)

    _wait(back, timeout=BACK_WITHIN, what=f"{name} started again", serve=serve)
    _wait(lambda: _api_status(web_port) == 401, timeout=BACK_WITHIN, what=f"serving after {name}", serve=serve)
    _wait(ping, timeout=BACK_WITHIN, what=f"a task round trip after {name}", serve=serve)
    return time.monotonic() - killed


def _var() -> Path:
    """A fresh var dir. Run as root, PostgreSQL runs as a system user of its own, which must reach the data folder:
    not under pytest's own temporary root, which every pytest session starting on the machine makes private again
    (0700)."""
    var = Path(tempfile.mkdtemp(prefix="lorekeeper-serve-")) / "var"
    var.parent.chmod(0o755)
    var.mkdir()
    return var


def _serve(var: Path, web_port: int, valkey_port: int, log) -> subprocess.Popen:
    """serve on its own var dir, ports and process group, no model loaded."""
    gone = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL", "LOREKEEPER_DATABASE_NAME")
    env = {k: v for k, v in os.environ.items() if k not in gone}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",
        LOREKEEPER_VAR_DIR=str(var),
        LOREKEEPER_VALKEY_PORT=str(valkey_port),
        LOREKEEPER_EMBEDDINGS_PROVIDER="none",
        LOREKEEPER_WEB_WORKERS="1",
        PYTHONUNBUFFERED="1",
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--addrport", f"127.0.0.1:{web_port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


# About a minute (a whole platform started, five children killed one by one): past what make test can spend, so
# marked slow, and .ci/run runs it after make test.
@pytest.mark.slow
def test_a_kill_9_of_each_child_of_serve_leaves_the_platform_serving_within_10_seconds(tmp_path):
    var = _var()
    web_port, valkey_port = _free_port(), _free_port()
    log = (tmp_path / "serve.log").open("w")
    serve = _serve(var, web_port, valkey_port, log)
    broker = f"redis://127.0.0.1:{valkey_port}/0"
    app = Celery("test_serve", broker=broker, set_as_current=False)
    results = redis.Redis(port=valkey_port, socket_timeout=2)
    took: dict[str, float] = {}
    try:
        said = lambda: (tmp_path / "serve.log").read_text()  # noqa: E731
        _wait(lambda: "Lorekeeper is up" in said(), timeout=120, what="'Lorekeeper is up'", serve=serve)
        # Said once the site answers, not once gunicorn listens (its worker then took 15 s more on a first start).
        assert _api_status(web_port) is not None, said()
        assert f"PostgreSQL made in {var / 'pgdata'} and started" in said()
        _wait(lambda: _api_status(web_port) == 401, timeout=120, what="the first answer", serve=serve)
        ping = lambda: _ping(app, results)  # noqa: E731
        _wait(ping, timeout=60, what="the worker's first answer", serve=serve)
        for name in CHILDREN:
            took[name] = _kill_and_time(name, var=var, web_port=web_port, serve=serve, ping=ping)
            assert took[name] < BACK_WITHIN, f"{name}: serving again after {took[name]:.1f} s"
        survivors = _pids(var)
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.send_signal(signal.SIGUSR1)  # where each of its threads is, into the log printed below
            time.sleep(2)
            raise
        assert serve.returncode == 0
        assert not [name for name, pid in survivors.items() if _running(pid)], survivors
        assert not (var / "pgdata" / "postmaster.pid").exists(), "PostgreSQL was left running"
        print("serving again after a kill -9 of: " + ", ".join(f"{n} {s:.1f} s" for n, s in took.items()))
    except BaseException:
        log.flush()
        print((tmp_path / "serve.log").read_text()[-6000:])
        raise
    finally:
        _kill_everything(serve, var)
        shutil.rmtree(var.parent, ignore_errors=True)
        log.close()
        app.close()
        results.close()


def _celery_of(var: Path) -> list[list[str]]:
    """The command lines of the Celery processes running for the var dir `var`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if "celery" in (process.info["cmdline"] or []) and process.environ().get("LOREKEEPER_VAR_DIR") == str(var):
                found.append(process.info["cmdline"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.slow
def test_a_serve_killed_outright_leaves_nothing_running_beside_the_next_one(tmp_path):
    """serve itself killed (kill -9, the out-of-memory killer) cannot stop its children: the next serve stops them
    first, says so, and serves alone (one worker, one beat); a port another program holds is refused by name."""
    var = _var()
    web_port, valkey_port = _free_port(), _free_port()
    log = (tmp_path / "serve.log").open("w")
    said = lambda: (tmp_path / "serve.log").read_text()  # noqa: E731
    first = _serve(var, web_port, valkey_port, log)
    second, left = None, {}
    try:
        _wait(lambda: "Lorekeeper is up" in said(), timeout=120, what="'Lorekeeper is up'", serve=first)
        _wait(lambda: set(CHILDREN) <= set(_pids(var)), timeout=60, what="every child up", serve=first)
        left = {name: pid for name, pid in _pids(var).items() if name != "postgres"}
        # A second serve of the same folder while the first runs is refused, and stops nothing of the first's.
        beside = _serve(var, _free_port(), valkey_port, log)
        beside.wait(timeout=60)
        assert beside.returncode != 0 and f"Lorekeeper already runs from {var}" in said()
        assert all(_running(pid) for pid in left.values()) and _api_status(web_port) == 401

        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert all(_running(pid) for pid in left.values()), left  # each in a group of its own: still running

        second = _serve(var, web_port, valkey_port, log)
        _wait(lambda: said().count("Lorekeeper is up") == 2, timeout=120, what="the second 'up'", serve=second)
        assert "left " in said() and "running: stopping them first." in said()
        assert not [name for name, pid in left.items() if _running(pid)], left
        assert _api_status(web_port) == 401
        celery = _celery_of(var)
        roles = sorted(next(word for word in ("worker", "beat") if word in cmdline) for cmdline in celery)
        assert roles.count("beat") == 1 and 1 <= roles.count("worker") <= 3, celery  # one worker, with its pool

        # Something else on the port: refused, naming it, before anything is started there.
        second.send_signal(signal.SIGINT)
        second.wait(timeout=60)
        with socket.socket() as holder:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port's closed connections wait
            holder.bind(("127.0.0.1", web_port))
            holder.listen()
            third = _serve(var, web_port, valkey_port, log)
            third.wait(timeout=120)
        assert third.returncode != 0 and f"Another program already listens on port {web_port}" in said()
    except BaseException:
        log.flush()
        print(said()[-6000:])
        raise
    finally:
        for serve in (first, second):
            if serve is not None:
                _kill_everything(serve, var)
        for pid in left.values():  # the first's, should the second not have stopped them
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(var.parent, ignore_errors=True)
        log.close()
