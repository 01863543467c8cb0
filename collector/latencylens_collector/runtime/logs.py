"""Repetitive log lines, rate-limited: a flood of identical warnings must not fill the disk.

A slow-client attack or a long ClickHouse outage makes the same warning (or traceback) fire for
every request; written in full, that was 230 MB in 30 s. :class:`RepeatFilter` lets through at most
``burst`` records of one kind per ``interval_s`` (a kind: logger, level and message template, not
its arguments), and the first record of a kind let through after some were held back says how
many. Records below WARNING (the access log, start-up info) always pass.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

DEFAULT_BURST: Final = 10
DEFAULT_INTERVAL_S: Final = 60.0
MAX_KINDS: Final = 1024
"""Kinds remembered at once (messages built by f-string would otherwise make kinds without end)."""
_UVICORN_LOGGERS: Final = ("uvicorn", "uvicorn.error")
"""Loggers with their own handlers when uvicorn configures logging (its access log is left alone)."""

Kind = tuple[str, int, str]
_DECISION: Final = "_latencylens_repeat_passed"
"""Set on a record once judged, so a record going to several handlers is counted once."""


@dataclass
class _Window:
    started: float
    passed: int = 0
    suppressed: int = 0


class RepeatFilter(logging.Filter):
    """At most ``burst`` records of a kind per ``interval_s``; the next one let through carries the
    count of those held back (``[37 more like this suppressed in the last 60 s]``)."""

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        min_level: int = logging.WARNING,
    ) -> None:
        super().__init__()
        self.burst = max(1, burst)
        self.interval_s = interval_s
        self.min_level = min_level
        self._clock = clock
        self._windows: OrderedDict[Kind, _Window] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.min_level:
            return True
        decided = getattr(record, _DECISION, None)
        if decided is not None:
            return bool(decided)
        passed = self._judge(record)
        setattr(record, _DECISION, passed)
        return passed

    def _judge(self, record: logging.LogRecord) -> bool:
        kind: Kind = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        window = self._windows.get(kind)
        if window is None or now - window.started >= self.interval_s:
            held = window.suppressed if window is not None else 0
            window = _Window(started=now)
            self._windows[kind] = window
            if held:
                _append(record, f" [{held} more like this suppressed in the last {self.interval_s:.0f} s]")
        self._windows.move_to_end(kind)
        while len(self._windows) > MAX_KINDS:
            self._windows.popitem(last=False)
        if window.passed >= self.burst:
            window.suppressed += 1
            return False
        window.passed += 1
        return True


def _append(record: logging.LogRecord, suffix: str) -> None:
    """Add text to a record's message, formatting its arguments now (a '%' in them is safe)."""
    record.msg = record.getMessage() + suffix
    record.args = None


def install(
    repeat_filter: RepeatFilter, loggers: Iterable[str] = ("", *_UVICORN_LOGGERS)
) -> list[logging.Handler]:
    """Put the filter on every handler of the root logger and of uvicorn's loggers (where records
    of every module end up); returns the handlers, for :func:`uninstall`."""
    handlers: list[logging.Handler] = []
    for name in loggers:
        for handler in logging.getLogger(name or None).handlers:
            if handler not in handlers:
                handler.addFilter(repeat_filter)
                handlers.append(handler)
    return handlers


def uninstall(repeat_filter: RepeatFilter, handlers: Iterable[logging.Handler]) -> None:
    for handler in handlers:
        handler.removeFilter(repeat_filter)
