"""Keep CPython's full garbage collections short: what start-up built is never scanned again.

A full collection scans every tracked object and holds the GIL while it does: with the service's
libraries loaded (~180,000 objects) one took ~180 ms on a 2-core machine, and under a heavy ingest
they come every few seconds, so every export in flight (and ``/healthz``) stalled that long.
Nearly all of those objects live as long as the process (modules, classes, the price data), so
once the service has started they are moved to CPython's permanent generation
(:func:`gc.freeze`); a full collection then scans only what ingest allocated since. Each
collection's pause is a metric (``latencylens_gc_pause_seconds``), so a stall shows up.

Threads waiting for the GIL get it back within :data:`SWITCH_INTERVAL_S`: CPython's 5 ms default
lets a thread building a large trace's rows keep the GIL for 5 ms each time the event loop gives it
up for a socket read, and an export's answer takes many such reads.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from typing import Any, Final

from latencylens_collector.runtime import metrics

_log = logging.getLogger(__name__)

YOUNG_THRESHOLD: Final = 50_000
"""Container allocations between young-generation collections. Decoding allocates a few dicts and
objects per span, so CPython's default (700) collects every few dozen spans and sweeps the whole
heap (hundreds of MB of queued spans and libraries) every ~70,000: ≈ 5 % of ingest CPU."""


SWITCH_INTERVAL_S: Final = 0.001
"""Longest a thread keeps the GIL while another waits for it (CPython's default: 0.005)."""

_switch_interval: list[float] = []
"""The interval before :func:`settle`, given back by :func:`release`."""
_started: list[float] = []
"""When the collection in progress started (one at a time: collections hold the GIL)."""


def settle() -> None:
    """Freeze every object there is and raise the young-generation threshold. Call once the
    service has started and loaded what its first export would (the price data)."""
    raise_young_threshold()
    if not _switch_interval:
        _switch_interval.append(sys.getswitchinterval())
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if _time_pause not in gc.callbacks:
        gc.callbacks.append(_time_pause)
    # No collection first: it would cost what a full collection costs, at every start (tests
    # start hundreds of services); what garbage start-up left is small and freed at release.
    gc.freeze()
    _log.debug("froze %d start-up objects", gc.get_freeze_count())


def raise_young_threshold() -> None:
    """Collect the young generation every :data:`YOUNG_THRESHOLD` allocations, not CPython's 700
    (unless collection is off)."""
    young, *older = gc.get_threshold()
    if 0 < young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, *older)


def release() -> None:
    """Hand the frozen objects back to the collector and undo :func:`settle` (the service is
    stopping: in a process that starts services again, as tests do, what an old one left must
    stay collectable)."""
    gc.unfreeze()
    if _switch_interval:
        sys.setswitchinterval(_switch_interval.pop())
    if _time_pause in gc.callbacks:
        gc.callbacks.remove(_time_pause)


def _time_pause(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
    elif _started:
        metrics.GC_PAUSE.labels(generation=str(info["generation"])).observe(time.perf_counter() - _started[0])
