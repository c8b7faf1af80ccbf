"""apps/common/supervisor.py: a child that keeps failing is tried again after a growing back-off, capped, and the log
says so; one that needs another is ended when that one dies; stopping ends the process groups."""

import sys
import time

import psutil

from apps.common import supervisor
from apps.common.supervisor import Process, Service, Supervisor


def _run(sup: Supervisor, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sup.check()
        time.sleep(0.01)


def test_a_child_that_fails_at_once_is_retried_with_a_capped_back_off_and_the_log_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(supervisor, "FIRST_DELAY", 0.05)
    monkeypatch.setattr(supervisor, "MAX_DELAY", 0.2)
    lines: list[str] = []
    sup = Supervisor(write=lines.append, pids_file=tmp_path / "serve.pids")
    sup.add(Process("web", [sys.executable, "-c", "import sys; sys.exit(3)"]))
    try:
        _run(sup, 2.5)
    finally:
        sup.stop()

    deaths = [line for line in lines if "exited with code 3" in line]
    delays = [float(line.split("starting it again in ")[1].split(" s")[0]) for line in deaths]
    assert delays[:4] == [0.05, 0.1, 0.2, 0.2]  # doubling, then capped
    assert len(deaths) < 2.5 / 0.2 + 2  # no spinning: each try waits for the cap
    assert "keeps failing soon after it starts" in deaths[2]
    assert "keeps failing" not in deaths[0]
    assert not (tmp_path / "serve.pids").exists()


def test_a_service_that_cannot_start_is_tried_again_after_its_back_off(monkeypatch):
    monkeypatch.setattr(supervisor, "FIRST_DELAY", 0.05)
    state = {"up": True, "tries": 0}

    def start():
        state["tries"] += 1
        if state["tries"] < 3:
            raise OSError("socket in use")
        state["up"] = True

    lines: list[str] = []
    sup = Supervisor(write=lines.append)
    sup.add(Service("postgres", start=start, alive=lambda: state["up"], pid=lambda: 42), started=True)
    state["up"] = False  # its server died
    _run(sup, 1.0)

    assert state["up"] and state["tries"] == 3
    assert sum("did not start (socket in use)" in line for line in lines) == 2
    assert lines[-1].startswith("postgres started again (pid 42")


def test_a_child_that_needs_another_is_ended_with_it_and_started_again():
    lines: list[str] = []
    sup = Supervisor(write=lines.append)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    broker = sup.add(Process("valkey", sleep))
    worker = sup.add(Process("worker", sleep, needs=broker))
    first = worker.pid()
    try:
        broker.kill()
        _run(sup, 1.5)
        assert "worker is started again too, as it needs valkey." in lines
        assert worker.alive() and worker.pid() != first and broker.alive()
    finally:
        sup.stop()
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
    assert not worker.alive() and not broker.alive()
