"""The web worker (apps/common/worker.py) under gunicorn: a worker whose event loop is busy but turning is never
killed for not reporting, however long its turns (up to half the timeout); one whose loop stopped turning is. A
full worker leaves new connections to the others, so that a request is refused only when every worker is full."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.servers import ROOT, free_port

pytestmark = pytest.mark.slow  # gunicorn timeouts waited out: .ci/run runs it after make test

WORKER = "apps.common.worker.Worker"
TIMEOUT = 6  # gunicorn's --timeout: a worker's loop turns of 1 s are a sixth of it, as 5 s are of the default 30


@contextmanager
def served(log: Path, workers: int = 1, holds: int = 0):
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "tests.common.loop_app:app", "-k", WORKER, "-w", str(workers),
        "-b", f"127.0.0.1:{port}", "--timeout", str(TIMEOUT), "--graceful-timeout", "1",
        "--no-control-socket", "--error-logfile", str(log),
    ]  # fmt: skip
    env = {**os.environ, "LOOP_APP_HOLDS": str(holds)}
    server = subprocess.Popen(command, cwd=ROOT, start_new_session=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.1)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)


def _pid(url: str) -> int:
    return int(httpx.get(url, timeout=5).text)


def test_a_worker_whose_loop_is_busy_in_long_turns_is_not_killed(tmp_path):
    with served(tmp_path / "gunicorn.log") as url:
        worker = _pid(url)
        httpx.get(f"{url}/busy", timeout=5)  # 14 s of one-second turns: over twice the timeout
        answers = []
        until = time.monotonic() + 15
        while time.monotonic() < until:
            time.sleep(1)
            try:
                answers.append(_pid(url))
            except httpx.TransportError as exc:
                answers.append(type(exc).__name__)
    assert "WORKER TIMEOUT" not in (tmp_path / "gunicorn.log").read_text()
    assert set(answers) == {worker}, answers


def test_a_worker_whose_loop_stopped_turning_is_killed_and_replaced(tmp_path):
    with served(tmp_path / "gunicorn.log") as url:
        worker = _pid(url)
        httpx.get(f"{url}/hang", timeout=5)
        deadline = time.monotonic() + 3 * TIMEOUT  # at most half a timeout of reports, then the arbiter's timeout
        while True:
            try:
                if _pid(url) != worker:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the hung worker was not replaced"
            time.sleep(0.5)
    assert "WORKER TIMEOUT" in (tmp_path / "gunicorn.log").read_text()


def _hold(url: str, opened: list) -> tuple[int, str]:
    """A connection held open, as a streamed reply holds it: its status and the pid of the worker that took it."""
    http = httpx.Client(timeout=10)
    response = http.send(http.build_request("GET", f"{url}/hold"), stream=True)
    body = response.iter_bytes()  # kept: an iterator let go of closes the connection
    opened.append((http, response, body))
    return response.status_code, next(body).decode().strip()


def test_a_full_worker_leaves_new_connections_to_the_others(tmp_path):
    """4 workers of 2 places each: 8 held connections, opened one after another, fill every place, whichever worker
    the kernel woke first for each (the workers share one socket); then the server is full, and the 9th is refused by
    the worker that took it after its hold."""
    opened: list = []
    with served(tmp_path / "gunicorn.log", workers=4, holds=2) as url:
        deadline = time.monotonic() + 30
        while len({_pid(url) for _ in range(20)}) < 4:  # every worker booted
            assert time.monotonic() < deadline, "the 4 workers did not start"
        try:
            held = [_hold(url, opened) for _ in range(8)]
            refused = _hold(url, opened)
        finally:
            for http, response, _ in opened:
                response.close()
                http.close()
    assert [status for status, _ in held] == [200] * 8, held
    assert sorted(Counter(pid for _, pid in held).values()) == [2, 2, 2, 2], held
    assert refused[0] == 503, refused
