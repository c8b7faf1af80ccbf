"""The web worker: uvicorn under gunicorn (docs/PRODUCTION.md's command names `apps.common.worker.Worker`), with a
liveness report to gunicorn's arbiter that a busy event loop cannot starve. (The time limits on request bodies and
the places of requests are config/asgi.py's.)

Gunicorn's arbiter kills a worker that has not reported for `--timeout` seconds (30 by default). The stock uvicorn
worker reports from its event loop, once every half of that, and only on one of every ten turns of its 0.1 s timer:
a loop whose turns take long (a flood of deltas to parse) reaches that timer too late, and the worker is killed while
it was serving everyone. Here a thread reports every sixth of the timeout, whenever the event loop has answered
within half of it (a task on the loop marks the time every sixth of the timeout). So:
- a loop that is busy but turns (each turn shorter than half the timeout) is never killed;
- a loop that no longer turns (a blocking call that never returns, a deadlock) stops the reports, and the arbiter
  kills the worker at most one and a half timeouts after its last turn;
- while the worker boots (importing the application, warming it: config/asgi.py), the thread reports without a loop,
  for at most LOREKEEPER_WORKER_BOOT_SECONDS (300): a boot that takes longer is killed as a hung one.
A turn of the loop that kept it more than a second is logged (a warning with its length), so a slow turn is seen
in the server's log before it is a problem.

The workers share one listening socket, and the kernel gives a new connection to whichever worker asks first: often
the busiest, which is awake and polling while the idle ones are still being scheduled. So one worker could reach its
cap of streamed replies (503 `server_busy`) while the server was half empty: bench/chat.py's 200 streams on 4
workers with a cap of 100 each were refused 32 times, one worker holding 97 streams while another held 40. Here a
worker accepts its connections itself (`_Acceptor`, in place of uvicorn's own server on the socket) and, while this
process is full (apps/common/capacity.py), leaves a new connection HOLD_SECONDS to the others; only one that none of
them took is accepted there (and answered 503 when it asks for a stream), so a request is refused as busy only when
every worker is full.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from typing import Any

from uvicorn_worker import UvicornWorker

from apps.common.capacity import process_full

BOOT_SECONDS = float(os.environ.get("LOREKEEPER_WORKER_BOOT_SECONDS") or 300)
SLOW_TURN = 1.0  # seconds: a loop that answered later than this is logged
HOLD_SECONDS = 0.25  # a full worker leaves a new connection this long to the others before it takes it
ACCEPT_BATCH = 100  # connections accepted in one turn at most, as asyncio's own server does


class Worker(UvicornWorker):
    CONFIG_KWARGS = {"loop": "auto", "http": "auto"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config.callback_notify = None  # the heartbeat thread reports instead of the loop's own timer
        # self.timeout is half gunicorn's --timeout (the arbiter gives its workers half, to report in time).
        self.every = max(0.1, self.timeout / 3)  # a sixth of --timeout
        self.answered: float | None = None  # when the event loop last turned; None while booting

    def init_process(self) -> None:
        self.boot_deadline = time.monotonic() + BOOT_SECONDS
        threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()
        super().init_process()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        ticker = loop.create_task(self._tick())
        # uvicorn's server (which calls this for each listening socket) then accepts through an _Acceptor.
        self.create_server = loop.create_server
        loop.create_server = self._acceptor  # type: ignore[method-assign]
        try:
            await super()._serve()
        finally:
            ticker.cancel()

    async def _acceptor(self, protocol_factory, *args: Any, sock: socket.socket | None = None, ssl=None, **kw: Any):
        if sock is None or args:  # not a socket of gunicorn's: as asyncio would
            return await self.create_server(protocol_factory, *args, sock=sock, ssl=ssl, **kw)
        return _Acceptor(asyncio.get_running_loop(), protocol_factory, sock, ssl, self.log)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            self.answered = time.monotonic()
            await asyncio.sleep(self.every)
            late = loop.time() - began - self.every
            if late > SLOW_TURN:
                self.log.warning("The event loop answered %.1f s late (a turn that long blocks every request).", late)

    def alive_now(self) -> bool:
        """Whether to report to the arbiter now."""
        if self.answered is None:
            return time.monotonic() < self.boot_deadline
        return time.monotonic() - self.answered < self.timeout

    def _heartbeat(self) -> None:
        while self.alive:
            if self.alive_now():
                try:
                    self.notify()
                except (OSError, ValueError):  # the worker's file closed: it is exiting
                    return
            time.sleep(self.every)


class _Acceptor:
    """Accepts a listening socket's connections and hands each to the protocol uvicorn's server would have, except
    while this process is full: a new connection is then left HOLD_SECONDS to the other workers, and accepted here
    only if it is still waiting after that (every worker full). Stands for the asyncio server uvicorn keeps (it calls
    `close` and `wait_closed` when the worker stops)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol_factory, sock: socket.socket, ssl, log) -> None:
        self.loop, self.factory, self.sock, self.ssl, self.log = loop, protocol_factory, sock, ssl, log
        self.fd = sock.fileno()
        self.resuming: asyncio.TimerHandle | None = None
        self.handing: set[asyncio.Task] = set()
        self.closed = False
        sock.setblocking(False)
        loop.add_reader(self.fd, self._readable)

    def _readable(self) -> None:
        self._accept(wait_when_full=True)

    def _accept(self, *, wait_when_full: bool) -> None:
        for _ in range(ACCEPT_BATCH):
            if wait_when_full and process_full():
                self._pause(HOLD_SECONDS)
                return
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return  # none waiting (another worker took it)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                self.log.error("Could not accept a connection (%s); trying again in a second.", exc)
                self._pause(1.0)  # out of files: the socket stays readable, so stop reading it a moment
                return
            conn.setblocking(False)
            task = self.loop.create_task(self._hand(conn))
            self.handing.add(task)
            task.add_done_callback(self.handing.discard)

    async def _hand(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(self.factory, conn, ssl=self.ssl)
        except Exception:
            conn.close()
            raise

    def _pause(self, seconds: float) -> None:
        self.loop.remove_reader(self.fd)
        self.resuming = self.loop.call_later(seconds, self._resume)

    def _resume(self) -> None:
        """After a hold: what still waits, every other worker left (all full), so it is taken here, full or not;
        then new connections are awaited again."""
        self.resuming = None
        if self.closed:
            return
        self._accept(wait_when_full=False)
        if self.resuming is None:  # not paused again (out of files)
            self.loop.add_reader(self.fd, self._readable)

    def close(self) -> None:
        self.closed = True
        if self.resuming is not None:
            self.resuming.cancel()
        self.loop.remove_reader(self.fd)

    async def wait_closed(self) -> None:
        return None
