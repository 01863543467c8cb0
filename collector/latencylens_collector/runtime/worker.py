"""How a worker process of the collector starts: quiet on Ctrl-C, its imports frozen.

The collector runs one such process, its row builder (:mod:`~latencylens_collector.pipeline.row_processes`).
A build allocates a few dicts and objects per span, and with CPython's default threshold (700
container allocations) the worker collected its young generation every few dozen spans, and its
older ones, with every module and class it imported, every few thousand: 12–17 % of a build's
CPU (``python -m bench row_worker``). So, as the collector does once it has started
(:func:`.heap.settle`), the worker imports what its jobs run, freezes it and raises the
young-generation threshold.
"""

from __future__ import annotations

import gc
import importlib
import signal

from latencylens_collector.runtime import heap


def initialize(*modules: str) -> None:
    """A worker pool's initializer: ignore SIGINT, import ``modules``, then :func:`gc.freeze`.

    Ctrl-C in a terminal reaches the whole process group: the collector stops itself (and then
    its workers); a worker must not die mid-job on its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in modules:
        importlib.import_module(name)
    heap.raise_young_threshold()
    gc.freeze()
