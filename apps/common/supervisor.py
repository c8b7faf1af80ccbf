"""Keeps `manage.py serve`'s processes up: one that dies is started again after a back-off, and each death and
restart is written on serve's output, so that one crashed process never takes the rest of the platform down.

A child is either a process serve started (`Process`: web, worker, beat, Valkey) or a service started elsewhere that
serve can check and start again (`Service`: the embedded PostgreSQL, which pg_ctl daemonizes). The back-off starts
at half a second and doubles up to ten; a child that stayed up a minute starts again from half a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from apps.common.files import write_whole

FIRST_DELAY = 0.5
MAX_DELAY = 10.0
# Up this long, a child's next death counts as a new trouble: its back-off starts again from FIRST_DELAY.
STABLE_AFTER = 60.0


def exit_description(returncode: int | None) -> str:
    if returncode is None:
        return "is gone"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class Child:
    """One supervised thing: `start()` brings it up (raising when it cannot), `alive()` says whether it still is."""

    def __init__(self, name: str, *, needs: Child | None = None) -> None:
        self.name = name
        self.needs = needs  # started again whenever that one dies
        self.delay = FIRST_DELAY
        self.started_at = 0.0
        self.restart_at: float | None = None  # when down: the time of its next start

    def start(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def pid(self) -> int | None:
        return None

    def death(self) -> str:
        """How it ended, for the log."""
        return "is gone"

    def stop(self) -> None:
        """Ask it to stop (SIGTERM); `wait_stopped` waits."""

    def kill(self) -> None:
        """End it now (the next `Supervisor.check` starts it again)."""

    def wait_stopped(self, timeout: float) -> None:
        pass


class Process(Child):
    """A process serve starts, in a session of its own (so that Ctrl-C reaches serve alone, which then stops the
    children in order) and so with a process group of its own: what the child started (gunicorn's workers, Celery's
    pool) is ended with it."""

    def __init__(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, needs: Child | None = None
    ) -> None:
        super().__init__(name, needs=needs)
        self.argv = argv
        self.env = env
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env, start_new_session=True)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def death(self) -> str:
        self._kill_group()  # a dead gunicorn master's workers would hold its port; a dead worker's pool, its tasks
        return exit_description(self.process.returncode if self.process else None)

    def stop(self) -> None:
        if self.alive():
            self._signal_group(signal.SIGTERM)

    def wait_stopped(self, timeout: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self.process.wait(timeout=5)
        self._kill_group()

    def kill(self) -> None:
        self._kill_group()

    def _kill_group(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


class Service(Child):
    """A service serve does not own as a process: `start` starts it again, `alive` checks it, `pid` names it."""

    def __init__(
        self, name: str, *, start: Callable[[], None], alive: Callable[[], bool], pid: Callable[[], int | None]
    ) -> None:
        super().__init__(name)
        self._start, self._alive, self._pid = start, alive, pid

    def start(self) -> None:
        self._start()

    def alive(self) -> bool:
        return self._alive()

    def pid(self) -> int | None:
        return self._pid()


class Supervisor:
    """Starts children, restarts the ones that die, and stops them all in reverse order. `write` takes a line for
    serve's output; `pids_file` (when given) always holds {name: pid} of the children up, for tools and tests."""

    def __init__(self, *, write: Callable[[str], None], pids_file: Path | None = None) -> None:
        self.children: list[Child] = []
        self.write = write
        self.pids_file = pids_file

    def add(self, child: Child, *, started: bool = False) -> Child:
        """Supervise `child`, starting it unless it was `started` already."""
        self.children.append(child)
        if started:
            child.started_at = time.monotonic()
        else:
            child.start()
            child.started_at = time.monotonic()
        self._write_pids()
        return child

    def check(self) -> None:
        """One round: note the children that died, start those whose back-off has passed."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is None:
                if not child.alive():
                    self._died(child, now)
            elif now >= child.restart_at:
                self._restart(child)

    def _died(self, child: Child, now: float) -> None:
        up = now - child.started_at
        if up >= STABLE_AFTER:
            child.delay = FIRST_DELAY
        how = child.death()
        line = f"{child.name} (pid {child.pid()}) {how} after {up:.1f} s up; starting it again in {child.delay:g} s."
        if child.delay >= MAX_DELAY:
            line += (
                f" It keeps failing soon after it starts, so it is tried only every {MAX_DELAY:g} s; its own output"
                " above says why (a port another program holds, a setting, a full disk)."
            )
        self.write(line)
        child.restart_at = now + child.delay
        child.delay = min(child.delay * 2, MAX_DELAY)
        self._write_pids()
        for dependent in self.children:
            if dependent.needs is child and dependent.restart_at is None and dependent.alive():
                # Ended now, not when `child` is back: it starts while `child` does, and waits for it.
                self.write(f"{dependent.name} is started again too, as it needs {child.name}.")
                dependent.kill()

    def _restart(self, child: Child) -> None:
        began = time.monotonic()
        try:
            child.start()
        except Exception as exc:  # noqa: BLE001 — whatever failed, the next try is after the back-off
            now = time.monotonic()
            child.restart_at = now + child.delay
            self.write(f"{child.name} did not start ({exc}); trying again in {child.delay:g} s.")
            child.delay = min(child.delay * 2, MAX_DELAY)
            return
        child.started_at = time.monotonic()
        child.restart_at = None
        took = child.started_at - began
        self.write(f"{child.name} started again (pid {child.pid()}, {took:.1f} s).")
        self._write_pids()

    def stop(self, *, timeout: float = 15) -> None:
        """Stop every child that is a process, the last started first."""
        for child in reversed(self.children):
            child.stop()
        for child in reversed(self.children):
            child.wait_stopped(timeout)
        self.children.clear()
        if self.pids_file is not None:
            self.pids_file.unlink(missing_ok=True)

    def _write_pids(self) -> None:
        if self.pids_file is None:
            return
        pids = {c.name: c.pid() for c in self.children if c.restart_at is None}
        write_whole(self.pids_file, json.dumps(pids))


def read_pids(path: Path) -> dict[str, int]:
    """{name: pid} as a Supervisor's pids file holds them; none when there is no file or it cannot be read."""
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {name: pid for name, pid in pids.items() if isinstance(pid, int)} if isinstance(pids, dict) else {}


def runs(pid: int, word: str) -> bool:
    """Whether process `pid` is alive and its command line holds `word` (Linux's /proc; elsewhere, never)."""
    try:
        return word in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False


def leads(pid: int) -> bool:
    """Whether `pid` leads its own process group, as every child a Supervisor starts does."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def started_before(pid: int, moment: float) -> bool:
    """Whether process `pid` began before `moment` (seconds since the epoch): a pid named in a file written at
    `moment` and running a process begun after it is another process's since."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
        booted = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return booted + ticks / os.sysconf("SC_CLK_TCK") <= moment + 1


def stop_group(pid: int, *, timeout: float = 10) -> None:
    """Stop the process group `pid` leads (a child a Supervisor started): SIGTERM, then SIGKILL after `timeout`."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _gone(pid):
                return
            time.sleep(0.1)


def _gone(pid: int) -> bool:
    """Ended: no such process, or a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rpartition(")")[2].split()[0] == "Z"
