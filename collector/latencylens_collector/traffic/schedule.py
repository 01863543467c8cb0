"""When each replayed request is sent: as recorded (time-scaled), Poisson at a rate, or closed loop.

Pure functions of shapes (no clock, no I/O); randomness comes from a seed. Open-loop schedules give
every request an absolute send offset; a closed loop gives none (the runner keeps ``concurrency``
requests in flight and sends the next as one finishes). Every schedule is bounded by a count and a
duration: requests whose offset falls at or past the duration are not sent.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from latencylens_collector.traffic.shape import RequestShape

NS_PER_S: Final = 1_000_000_000


@dataclass(frozen=True)
class Arrival:
    """Send ``shape`` ``at_ns`` after the run starts."""

    at_ns: int
    shape: RequestShape


@dataclass(frozen=True)
class Plan:
    """What a run sends, in order. ``concurrency`` set: closed loop (offsets are all 0)."""

    arrivals: tuple[Arrival, ...]
    concurrency: int | None = None
    duration_ns: int | None = None

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None

    def describe(self) -> str:
        if self.concurrency is not None:
            return f"closed loop at concurrency {self.concurrency}"
        if not self.arrivals:
            return "nothing to send"
        span_s = self.arrivals[-1].at_ns / NS_PER_S
        return f"{len(self.arrivals)} arrivals over {span_s:.1f} s"


def as_recorded(shapes: Sequence[RequestShape], speed: float = 1.0) -> list[Arrival]:
    """Recorded arrival offsets divided by ``speed`` (2 sends twice as fast)."""
    if not speed > 0:
        raise ValueError("speed must be greater than 0")
    return [Arrival(round(shape.offset_ns / speed), shape) for shape in shapes]


def poisson(shapes: Sequence[RequestShape], rate_per_s: float, seed: int = 0) -> list[Arrival]:
    """Shapes in recorded order, sent as a Poisson process of ``rate_per_s`` (exponential gaps;
    the first request at 0)."""
    if not rate_per_s > 0:
        raise ValueError("rate must be greater than 0")
    rng = random.Random(seed)
    at = 0.0
    arrivals = []
    for index, shape in enumerate(shapes):
        if index:
            at += rng.expovariate(rate_per_s)
        arrivals.append(Arrival(round(at * NS_PER_S), shape))
    return arrivals


def bounded(
    arrivals: Sequence[Arrival], limit: int | None = None, duration_ns: int | None = None
) -> list[Arrival]:
    """The first ``limit`` arrivals that start before ``duration_ns``."""
    kept = [a for a in arrivals if duration_ns is None or a.at_ns < duration_ns]
    return kept if limit is None else kept[: max(limit, 0)]


def plan(
    shapes: Sequence[RequestShape],
    *,
    speed: float | None = None,
    rate_per_s: float | None = None,
    concurrency: int | None = None,
    limit: int | None = None,
    duration_ns: int | None = None,
    seed: int = 0,
) -> Plan:
    """One of the three schedules (at most one of ``speed``, ``rate_per_s``, ``concurrency``;
    none means as recorded at 1×), bounded by ``limit`` and ``duration_ns``."""
    chosen = [
        name
        for name, value in (("speed", speed), ("rate", rate_per_s), ("concurrency", concurrency))
        if value is not None
    ]
    if len(chosen) > 1:
        raise ValueError(f"choose one of speed, rate and concurrency (got {', '.join(chosen)})")
    if limit is not None and limit < 0:
        raise ValueError("limit must not be negative")
    if duration_ns is not None and duration_ns <= 0:
        raise ValueError("duration must be greater than 0")
    if concurrency is not None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        arrivals = [Arrival(0, shape) for shape in shapes]
        return Plan(tuple(bounded(arrivals, limit)), concurrency=concurrency, duration_ns=duration_ns)
    if rate_per_s is not None:
        arrivals = poisson(shapes, rate_per_s, seed)
    else:
        arrivals = as_recorded(shapes, 1.0 if speed is None else speed)
    return Plan(tuple(bounded(arrivals, limit, duration_ns)), duration_ns=duration_ns)


__all__ = ["NS_PER_S", "Arrival", "Plan", "as_recorded", "bounded", "plan", "poisson"]
