"""Per-project CPU shares: while other projects are active, no project may take more than a set
part of the collector's Python time.

Turns (:mod:`.turns`, :mod:`.queue`) bound how long one project's export waits behind another's,
but not how much of the GIL the other gets: a project sending huge attributes, deep chains and
bursts at once keeps the decoder and the writer busy, and every other project's export then runs
at a fraction of its speed (on a 2-core machine its p99 grew 3–7×). So the CPU each project's
exports cost is measured where it is spent (decoding in the receiver's thread, writing in the
writer's, shared among a batch's projects by spans) as a rate in CPU-seconds per second, decayed
over :data:`WINDOW_S`. While another project has been charged within :data:`ACTIVE_S`, a project
whose rate is above ``share`` is refused before its body is read (429 / RESOURCE_EXHAUSTED with
Retry-After, like a full queue: nothing is lost, the exporter retries). Alone, a project may use
everything; a project under its share is never refused by this.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Final

from latencylens_collector.pipeline.queue import QueueFull

WINDOW_S: Final = 5.0
"""Time constant of the decayed rate: the last few seconds count, a burst long ago does not."""
ACTIVE_S: Final = 10.0
"""A project charged this recently counts as active."""


class CpuShares:
    """Decayed CPU rate per project, and the check that refuses a project over its share."""

    def __init__(self, share: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.share = share
        """CPU-seconds per second one project may use while others are active; 0 or less: no limit."""
        self._monotonic = monotonic
        self._rates: dict[str, tuple[float, float]] = {}
        """project → (rate at the time, that time)."""
        self._lock = threading.Lock()

    def charge(self, project: str, cpu_s: float) -> None:
        """Add ``cpu_s`` CPU-seconds spent on ``project``'s exports now."""
        if cpu_s <= 0:
            return
        now = self._monotonic()
        with self._lock:
            self._rates[project] = (self._decayed(project, now) + cpu_s / WINDOW_S, now)

    def rate(self, project: str) -> float:
        """``project``'s CPU-seconds per second over the last :data:`WINDOW_S` or so."""
        with self._lock:
            return self._decayed(project, self._monotonic())

    def check(self, project: str) -> None:
        """Raise :class:`QueueFull` when ``project`` is over its share while another is active."""
        if self.share <= 0:
            return
        now = self._monotonic()
        with self._lock:
            for other, (_, at) in list(self._rates.items()):
                if now - at > ACTIVE_S:
                    del self._rates[other]
            if not any(other != project for other in self._rates):
                return
            rate = self._decayed(project, now)
        if rate > self.share:
            raise QueueFull(
                f"project {project!r} is using {rate:.2f} CPU-seconds per second of the collector "
                f"while other projects send too (its share: {self.share:.2f}); retry later"
            )

    def _decayed(self, project: str, now: float) -> float:
        rate, at = self._rates.get(project, (0.0, now))
        return rate * math.exp(-max(0.0, now - at) / WINDOW_S)
