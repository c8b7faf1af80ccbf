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
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

from uvicorn_worker import UvicornWorker

BOOT_SECONDS = float(os.environ.get("LOREKEEPER_WORKER_BOOT_SECONDS") or 300)
SLOW_TURN = 1.0  # seconds: a loop that answered later than this is logged


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
        ticker = asyncio.get_running_loop().create_task(self._tick())
        try:
            await super()._serve()
        finally:
            ticker.cancel()

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
