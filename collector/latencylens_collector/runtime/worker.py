"""How a worker process of the collector starts: quiet on Ctrl-C, its imports frozen.

The collector runs one such process, the row builder (:mod:`~latencylens_collector.pipeline.row_processes`).
Its builds allocate a few dicts and objects per span, and with CPython's default threshold (700
container allocations) the young generation was collected every few dozen spans, and older ones,
with every module and class the worker imported, every few thousand: ≈ 15 % of a build's CPU
(``python -m bench rows_sql``'s read-backs built in a spawned process: 22.8 → 19.3 µs a span). So,
as the collector does once it has started (:func:`.heap.settle`), the worker imports what its
jobs run, freezes it and raises the young-generation threshold.
"""

from __future__ import annotations

import gc
import importlib
import signal

from latencylens_collector.runtime.heap import YOUNG_THRESHOLD


def initialize(*modules: str) -> None:
    """A worker pool's initializer: ignore SIGINT, import ``modules``, then :func:`gc.freeze`.

    Ctrl-C in a terminal reaches the whole process group: the collector stops itself (and then
    its workers); a worker must not die mid-job on its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in modules:
        importlib.import_module(name)
    young, *older = gc.get_threshold()
    if 0 < young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, *older)
    gc.freeze()
