"""Per-project CPU shares: while other projects are active, no project may take more than a set
part of the collector's Python time.

Turns (:mod:`.turns`, :mod:`.queue`) bound how long one project's export waits behind another's,
but not how much of the GIL the other gets: a project sending huge attributes, deep chains and
bursts at once keeps the decoder and the writer busy, and every other project's export then runs
at a fraction of its speed (on a 2-core machine its p99 grew 3–7×). So the CPU each project's
exports cost is measured where it is spent (decoding in the receiver's thread, writing in the
writer's, shared among a batch's projects by spans) as a rate in CPU-seconds per second, decayed
over :data:`WINDOW_S`. While another project has been charged within :data:`ACTIVE_S`, a project
whose load is above ``share`` and at least every other active project's is refused before its
body is read (429 / RESOURCE_EXHAUSTED with Retry-After, like a full queue: nothing is lost, the
exporter retries). Alone, a project may use everything; a project under its share, or lighter than
another, is never refused by this.

A project's load is its rate plus what its exports admitted and not yet answered will cost, at its
recent mean CPU per export: its CPU is charged only once an export is decoded and written, so
without it a burst of forty exports arriving together would all pass the check before the first
was charged, and overshoot the share for seconds.
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
        self._exports: dict[str, tuple[float, float]] = {}
        """project → (exports answered per second at the time, that time), decayed as the rate."""
        self._in_flight: dict[str, int] = {}
        """project → exports admitted and not yet answered."""
        self._lock = threading.Lock()

    def charge(self, project: str, cpu_s: float) -> None:
        """Add ``cpu_s`` CPU-seconds spent on ``project``'s exports now."""
        if cpu_s <= 0:
            return
        now = self._monotonic()
        with self._lock:
            self._rates[project] = (_decayed(self._rates, project, now) + cpu_s / WINDOW_S, now)

    def rate(self, project: str) -> float:
        """``project``'s CPU-seconds per second over the last :data:`WINDOW_S` or so."""
        with self._lock:
            return _decayed(self._rates, project, self._monotonic())

    def check(self, project: str) -> None:
        """Raise :class:`QueueFull` when ``project``'s load is over its share and the heaviest
        while another project is active."""
        if self.share <= 0:
            return
        now = self._monotonic()
        with self._lock:
            for other, (_, at) in list(self._rates.items()):
                if now - at > ACTIVE_S:
                    del self._rates[other]
                    self._exports.pop(other, None)
            others = [other for other in self._rates if other != project]
            if not others:
                return
            load = self._load(project, now)
            heaviest = load >= max(self._load(other, now) for other in others)
        if load > self.share and heaviest:
            raise QueueFull(
                f"project {project!r} is using {load:.2f} CPU-seconds per second of the collector, "
                f"more than any other project sending (its share while others send: "
                f"{self.share:.2f}); retry later"
            )

    def admit(self, project: str) -> None:
        """:meth:`check`, then count one more export of ``project`` in flight until :meth:`done`."""
        self.check(project)
        with self._lock:
            self._in_flight[project] = self._in_flight.get(project, 0) + 1

    @property
    def in_flight(self) -> int:
        """Exports admitted and not yet answered, of every project (a few projects: summed)."""
        with self._lock:  # receivers' threads change the counts meanwhile
            return sum(self._in_flight.values())

    def done(self, project: str) -> None:
        """An export :meth:`admit` let in was answered (or failed)."""
        now = self._monotonic()
        with self._lock:
            self._exports[project] = (_decayed(self._exports, project, now) + 1 / WINDOW_S, now)
            left = self._in_flight.get(project, 0) - 1
            if left > 0:
                self._in_flight[project] = left
            else:
                self._in_flight.pop(project, None)

    def _load(self, project: str, now: float) -> float:
        """The rate plus the exports in flight at the recent mean CPU per export."""
        rate = _decayed(self._rates, project, now)
        in_flight = self._in_flight.get(project, 0)
        if not in_flight:
            return rate
        exports = _decayed(self._exports, project, now)
        return rate + in_flight * (rate / exports if exports > 0 else 0.0) / WINDOW_S


def _decayed(rates: dict[str, tuple[float, float]], project: str, now: float) -> float:
    rate, at = rates.get(project, (0.0, now))
    return rate * math.exp(-max(0.0, now - at) / WINDOW_S)
