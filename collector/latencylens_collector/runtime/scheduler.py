"""Runs background work (SLO evaluation, rollup refresh) every interval in a daemon thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_log = logging.getLogger(__name__)


class Scheduler:
    """Calls ``run`` at once, then every ``interval_s`` seconds until :meth:`stop`.

    The wait is :meth:`threading.Event.wait`, so stopping never waits out an interval.
    """

    def __init__(self, run: Callable[[], object], interval_s: float, name: str) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self._run = run
        self.interval_s = interval_s
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._run()
            except Exception:
                _log.exception("%s failed", self._name)
            self.runs += 1
            if self._stop.wait(self.interval_s):
                return
