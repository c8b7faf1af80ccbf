"""The web worker (apps/common/worker.py) under gunicorn: a worker whose event loop is busy but turning is never
killed for not reporting, however long its turns (up to half the timeout); one whose loop stopped turning is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.servers import ROOT, free_port

pytestmark = pytest.mark.slow  # gunicorn timeouts waited out: .ci/run runs it after make test

WORKER = "apps.common.worker.Worker"
TIMEOUT = 6  # gunicorn's --timeout: a worker's loop turns of 1 s are a sixth of it, as 5 s are of the default 30


@contextmanager
def served(log: Path):
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "tests.common.loop_app:app", "-k", WORKER, "-w", "1",
        "-b", f"127.0.0.1:{port}", "--timeout", str(TIMEOUT), "--graceful-timeout", "1",
        "--no-control-socket", "--error-logfile", str(log),
    ]  # fmt: skip
    server = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
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
